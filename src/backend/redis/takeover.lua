-- Probe the holders of many locks for death, and end each hold whose holder's manager has been
-- missing for the holder's grace (DESIGN.md, "Dead holders"). The watchdog of a manager with
-- waiting requests runs it on the locks they wait for.
-- KEYS: lock hashes (each lock's marks, queues, waiting managers, holders and counter are named
--       after it: one server only)
-- ARGV: the claim lease in ms and the inbox channel prefix, as '<ms> <prefix>'
-- Returns per lock: -1 when a hold was ended; n > 0 when a holder's manager is missing and its
-- hold may be ended n ms from now; 0 otherwise (free, its holders listen, or they never asked to
-- be taken over).
local claim_ms, prefix = string.match(ARGV[1], '^(%d+) (.*)$')
local heard = {}
local run_id

-- The server's run id (false when its ACL refuses INFO): a mark made under another one was
-- brought back by a restart or a failover.
local function server_run()
  if run_id == nil then
    local info = redis.pcall('INFO', 'server')
    run_id = type(info) == 'string' and string.match(info, 'run_id:(%x+)') or false
  end
  return run_id
end

-- Judge one hold of `owner` whose mark is the key `mark`: `hold()` names the hold, `ttl()` is how
-- long it lives on (ms). Returns 0 when nothing is to be done (its manager listens, never asked
-- to be taken over, or a restart could not be told), n > 0 ms when marked, -1 when its manager
-- has been missing for its grace (the mark goes: the caller ends the hold).
local function judge(owner, mark, hold, ttl)
  local manager = manager_of(owner)
  local grace = string.match(manager, 'g(%d+)$')
  if not grace then
    return 0
  end
  if listens(prefix, manager, heard) then
    redis.call('DEL', mark)
    return 0
  end
  local run = server_run()
  if not run then
    return 0
  end
  local name = hold()
  local since, marked_run, marked = string.match(redis.call('GET', mark) or '', '^(%d+) (%x+) (.*)$')
  if marked_run ~= run or marked ~= name then
    redis.call('SET', mark, int(now_us()) .. ' ' .. run .. ' ' .. name, 'PX', int(math.max(ttl(), 1)))
    return tonumber(grace)
  end
  local left = tonumber(since) + tonumber(grace) * 1000 - now_us()
  if left > 0 then
    return math.ceil(left / 1000)
  end
  redis.call('DEL', mark)
  return -1
end

-- After the hold of an exclusive or fair `lock` made under `token` (nil for a plain lock) ended:
-- its block retired, the lock goes on as its release would pass it, as `force_release.lua` does.
local function pass_on(lock, token)
  local fence = lock .. ':f'
  if token then
    retire_block(fence, token)
  else
    -- a plain lock's token was the server's clock or one above the counter when it was taken
    retire_block(fence, int(math.max(now_us(), tonumber(redis.call('GET', fence) or '0') + 1)))
  end
  redis.call('DEL', lock)
  local waiters, q = lock .. ':w', lock .. ':ql'
  if redis.call('EXISTS', waiters, q) == 0 then
    return
  end
  if not grant_next(lock, q, fence, prefix, claim_ms) then
    notify_next(waiters, prefix, lock)
  end
end

-- Probe the one holder of an exclusive or fair `lock`: `owner`, its `token` (nil for a plain
-- lock, whose `value` names the hold).
local function probe_one(lock, owner, token, value)
  local hold = function()
    return value or owner .. '|' .. token
  end
  local ttl = function()
    return redis.call('PTTL', lock)
  end
  local verdict = judge(owner, lock .. ':d', hold, ttl)
  if verdict == -1 then
    pass_on(lock, token)
  end
  return verdict
end

-- Probe every holder of the shared `lock` of `family`; the room of those ended goes to the
-- waiters at the head of its queue, as a release's does. (Their tokens were reserved in the
-- counter when they were granted: nothing to retire.)
local function probe_shared(lock, family)
  local holders, now = lock .. ':s', now_ms()
  local ended, soonest = false, 0
  local expiries = redis.call('ZRANGE', holders, 0, -1, 'WITHSCORES')
  for j = 1, #expiries, 2 do
    local owner, expiry = expiries[j], tonumber(expiries[j + 1])
    local hold = function()
      return owner .. '|' .. (redis.call('HGET', lock, '#t:' .. owner) or '')
    end
    local ttl = function()
      return expiry - now
    end
    local verdict = expiry > now and judge(owner, lock .. ':d:' .. owner, hold, ttl) or 0
    if verdict == -1 then
      drop_shared(lock, holders, owner)
      ended = true
    elseif verdict > 0 and (soonest == 0 or verdict < soonest) then
      soonest = verdict
    end
  end
  if not ended then
    return soonest
  end
  local q = lock .. ':qs'
  grant_shared(lock, holders, q, lock .. ':f', family, prefix, claim_ms)
  tidy_shared(lock, holders, q)
  return -1
end

-- Probe the holders of `lock`, whatever its kind.
local function probe(lock)
  local kind = redis.call('TYPE', lock)['ok']
  if kind == 'string' then
    local value = redis.call('GET', lock)
    return probe_one(lock, string.match(value, '^!?([^|]*)'), nil, value)
  elseif kind ~= 'hash' then
    return 0
  end
  local fields = redis.call('HGETALL', lock)
  local owner, token
  for j = 1, #fields, 2 do
    local field = fields[j]
    if field == '#s' then
      return probe_shared(lock, fields[j + 1])
    elseif field == '#t' then
      token = fields[j + 1]
    elseif string.byte(field) ~= 35 then
      owner = field
    end
  end
  if not (owner and token) then
    return 0
  end
  return probe_one(lock, owner, token)
end

local answers = {}
for i, lock in ipairs(KEYS) do
  answers[i] = probe(lock)
end
return answers
