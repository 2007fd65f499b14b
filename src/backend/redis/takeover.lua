-- Probe the holders of many locks for death, and end each hold whose holder's manager has been
-- missing for the holder's grace (DESIGN.md, "Dead holders"). The watchdog of a manager with
-- waiting requests runs it on the locks they wait for.
-- KEYS: lock hashes (each lock's mark, queue, waiting managers and counter are named after it:
--       one server only)
-- ARGV: the claim lease in ms and the inbox channel prefix, as '<ms> <prefix>'
-- Returns per lock: -1 when its hold was ended; n > 0 when its holder's manager is missing and
-- the hold may be ended n ms from now; 0 otherwise (free, shared, its holder listens, or its
-- holder never asked to be taken over).
local claim_ms, prefix = string.match(ARGV[1], '^(%d+) (.*)$')
local heard = {}
local run_id

-- The owner of `lock`'s one hold and what names that hold (its value for a plain lock, else the
-- owner and its token), and the hold's token when it is a hash; false when the lock is free,
-- shared, or not of this crate.
local function holder_of(lock)
  local kind = redis.call('TYPE', lock)['ok']
  if kind == 'string' then
    local value = redis.call('GET', lock)
    return string.match(value, '^!?([^|]*)'), value
  elseif kind ~= 'hash' then
    return false
  end
  local fields = redis.call('HGETALL', lock)
  local owner, token
  for j = 1, #fields, 2 do
    local field = fields[j]
    if field == '#s' then
      return false
    elseif field == '#t' then
      token = fields[j + 1]
    elseif string.byte(field) ~= 35 then
      owner = field
    end
  end
  if not (owner and token) then
    return false
  end
  return owner, owner .. '|' .. token, token
end

-- End the hold of the dead holder of `lock` (made under `token`; nil for a plain lock) as its
-- release would, as `force_release.lua` does.
local function end_hold(lock, token)
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

-- One probe of `lock` (see the header).
local function probe(lock)
  local owner, hold, token = holder_of(lock)
  if not owner then
    return 0
  end
  local manager = manager_of(owner)
  local grace = string.match(manager, 'g(%d+)$')
  local mark = lock .. ':d'
  if not grace then
    return 0
  end
  if listens(prefix, manager, heard) then
    redis.call('DEL', mark)
    return 0
  end
  -- a mark another hold left, or one a restart or failover brought back, is no mark; a user
  -- whose ACL refuses INFO cannot tell, and takes nothing over
  if not run_id then
    local info = redis.pcall('INFO', 'server')
    run_id = type(info) == 'string' and string.match(info, 'run_id:(%x+)') or false
  end
  if not run_id then
    return 0
  end
  local since, run, marked = string.match(redis.call('GET', mark) or '', '^(%d+) (%x+) (.*)$')
  if run ~= run_id or marked ~= hold then
    local ttl = math.max(redis.call('PTTL', lock), 1)
    redis.call('SET', mark, int(now_us()) .. ' ' .. run_id .. ' ' .. hold, 'PX', int(ttl))
    return tonumber(grace)
  end
  local left = tonumber(since) + tonumber(grace) * 1000 - now_us()
  if left > 0 then
    return math.ceil(left / 1000)
  end
  redis.call('DEL', mark)
  end_hold(lock, token)
  return -1
end

local answers = {}
for i, lock in ipairs(KEYS) do
  answers[i] = probe(lock)
end
return answers
