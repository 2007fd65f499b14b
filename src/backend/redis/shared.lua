-- Shared locks: read/write locks and semaphores. The lock hash holds the family under '#s' ('rw',
-- or 's' followed by the number of permits), each holder's re-entry count under its owner id,
-- its fencing token under '#t:' .. owner, the write holder under '#x', and a grant not yet taken
-- up under '#g:' .. owner (the wait it was made to). The zset `<lock>:s` keeps each holder's
-- expiry in server milliseconds, so that every hold has a lease of its own. Waiters queue in the
-- list `<lock>:qs` as '<owner>|<n>|<kind>', the kind being 'r' (read), 'w' (write) or 'n' (permit).
local function now_ms()
  return math.floor(now_us() / 1000)
end

-- Forget every trace of `owner`'s hold of the shared `lock` (all its re-entries).
local function drop_shared(lock, holders, owner)
  redis.call('HDEL', lock, owner, '#t:' .. owner, '#g:' .. owner, '#m:' .. owner)
  if redis.call('HGET', lock, '#x') == owner then
    redis.call('HDEL', lock, '#x')
  end
  redis.call('ZREM', holders, owner)
end

-- Drop the holds of the shared `lock` whose lease ran out by `now` (server ms). The holders' zset
-- may have expired with its last holds, leaving their fields in the hash: a write hold no longer
-- in the zset is dropped too, since its mark would keep reads out.
local function purge(lock, holders, now)
  local gone = redis.call('ZRANGEBYSCORE', holders, '-inf', now)
  for _, owner in ipairs(gone) do
    drop_shared(lock, holders, owner)
  end
  local writer = redis.call('HGET', lock, '#x')
  if writer and not redis.call('ZSCORE', holders, writer) then
    drop_shared(lock, holders, writer)
  end
end

-- Whether `owner`'s hold of the shared `lock` (its fields in the hash) is live: in the holders'
-- zset. One that is not went with the zset when its lease ran out; its fields are dropped.
local function live_hold(lock, holders, owner)
  if redis.call('ZSCORE', holders, owner) then
    return true
  end
  drop_shared(lock, holders, owner)
  return false
end

-- Whether a hold of `kind` fits beside the holders of a `family` lock: a read beside reads, a
-- write alone, a permit while fewer than the family's number hold one.
local function has_room(lock, holders, family, kind)
  if kind == 'r' then
    return redis.call('HEXISTS', lock, '#x') == 0
  end
  local count = redis.call('ZCARD', holders)
  if kind == 'w' then
    return count == 0
  end
  return count < tonumber(string.sub(family, 2))
end

-- Make `owner` a holder of kind `kind` of the `family` lock for `ms` ms (a decimal string) from
-- `now`, under a new fencing token, with `meta` for `inspect.lua` (`meta_of`). The lock's keys
-- live at least as long as the hold.
local function take_shared(lock, holders, fence, family, owner, kind, now, ms, meta)
  local token = reserve_token(fence)
  redis.call('HSET', lock, '#s', family, owner, '1', '#t:' .. owner, int(token), '#m:' .. owner, meta)
  if kind == 'w' then
    redis.call('HSET', lock, '#x', owner)
  end
  redis.call('ZADD', holders, int(now + tonumber(ms)), owner)
  live_at_least(lock, tonumber(ms))
  live_at_least(holders, tonumber(ms))
  return token
end

-- One call of a shared grant script grants this many holds at most (each costs Redis a dozen
-- commands); as with MAX_LOOKED, a grant stopped by a bound says so, and is carried on at once.
local MAX_GRANTED = 100

-- Grant the room of a shared lock to the waiters at the head of its queue, in order: one write,
-- or every read up to the next write, or permits while any are left. Each grant starts with the
-- claim lease (`claim_ms`, a decimal string) that its manager extends; each manager gets ONE
-- message for all its grants, one line per grant. A waiter whose heartbeat ran out, or whose
-- manager no longer listens, is dropped wherever it stands, so that a dead write at the head
-- never holds back the reads behind it.
-- `caller` (optional) is the waiter running this script: it learns of its grant from the answer.
-- `releaser` (optional) is an owner whose manager runs this script: the grants to that manager's
-- waiters are not published but returned, for the manager to hand over itself.
-- Returns the caller's token when it was granted, else false; the grants to the releaser's
-- manager (one per line), if any; and whether it stopped at a bound (MAX_LOOKED, MAX_GRANTED)
-- with waiters left that may fit.
local function grant_shared(lock, holders, q, fence, family, prefix, claim_ms, caller, releaser)
  local now, mine, handed, more = now_ms(), false, nil, false
  local heard, here = {}, releaser and manager_of(releaser)
  local messages, order, owners, granted = {}, {}, {}, 0
  for looked = 1, MAX_LOOKED + 1 do
    local head = redis.call('LINDEX', q, 0)
    if not head then
      break
    elseif looked > MAX_LOOKED or granted >= MAX_GRANTED then
      more = true
      break
    end
    local beat, manager = heartbeat_key(lock, head), manager_of(head)
    local wait = redis.call('GET', beat)
    local alive = wait
      and (head == caller or manager == here or listens(prefix, manager, heard))
    if alive and not has_room(lock, holders, family, string.sub(head, -1)) then
      break
    end
    redis.call('LPOP', q)
    redis.call('DEL', beat)
    if alive then
      granted = granted + 1
      local owner = owner_of(head)
      local token = take_shared(lock, holders, fence, family, owner, string.sub(head, -1), now, claim_ms, granted_meta(wait))
      if head == caller then
        mine = token
      else
        redis.call('HSET', lock, '#g:' .. owner, head)
        local grant = 'g|' .. lock .. '|' .. head .. '|' .. int(token)
        if messages[manager] then
          messages[manager] = messages[manager] .. '\n' .. grant
        else
          messages[manager] = grant
          order[#order + 1] = manager
        end
        owners[#owners + 1] = owner
      end
    end
  end
  for _, manager in ipairs(order) do
    if manager == here then
      -- handed over by the releasing manager itself, which is alive: it sent this script
      handed = messages[manager]
    elseif redis.call('PUBLISH', prefix .. manager, messages[manager]) == 0 then
      -- (it stopped listening, as far as this call can tell) its grants go, their room on
      for _, owner in ipairs(owners) do
        if manager_of(owner) == manager then
          drop_shared(lock, holders, owner)
        end
      end
      more = true
    end
  end
  return mine, handed, more
end

-- After a shared lock lost a holder or a waiter: when nobody holds it and nobody waits, its keys go.
local function tidy_shared(lock, holders, q)
  if redis.call('ZCARD', holders) == 0 and redis.call('EXISTS', q) == 0 then
    redis.call('DEL', lock, holders)
  end
end
