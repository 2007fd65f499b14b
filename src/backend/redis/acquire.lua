-- Take an exclusive reentrant lock, or record that this manager waits for it.
-- KEYS: lock hash (owner -> count, '#t' -> token, '#w' -> a manager may wait), then, on a
--       cluster only (see `plain_release.lua`): waiting managers (zset), fencing counter, the
--       lock's fair queue
-- ARGV: owner ('<manager id>:<n>'), lease ms, how the request waits: '' (it does not), 'w' (it
--       will), 'wo' (it will, and other requests of this process wait for the lock too), 'wr' (it
--       will, and an earlier attempt of it found the lock busy and recorded this manager as
--       waiting), 'wor' (both), [the token of the owner's hold of the lock (absent: its manager
--       knows of none; '' the same), what `inspect` shows of the hold: a tab, the label of the
--       manager's process, a tab, the request it serves]
-- Returns the fencing token (> 0) when acquired; when busy, -1 - the lock's remaining lease in ms;
-- 'fair' when the lock is held in fair mode or fair requests queue for it (the request then waits
-- in that queue: a fair request); when the lock is held or queued for in another family of modes
-- (they are not mixed on one lock), that family's name: 'read/write' or 'semaphore'. One value,
-- not a table: a table answer costs Redis more.
local lock = KEYS[1]
local waiters, fence = KEYS[2] or lock .. ':w', KEYS[3] or lock .. ':f'
local q = KEYS[4] or lock .. ':ql'
local owner, lease, wait = ARGV[1], ARGV[2], ARGV[3]
local about = ARGV[5]

-- The common case, a free lock nobody queues for in fair mode, in one call: the lock's state is
-- read only when one of the two keys exists.
local free = redis.call('EXISTS', lock, q) == 0
local holds, token, marked, fair, shared
if not free then
  holds, token, marked, fair, shared = lock_state(lock, owner)
end
if fair then
  return 'fair'
elseif shared then
  return shared_family(shared)
end
if holds and token ~= ARGV[4] then
  -- A hold of the owner that it does not have (a restart from a snapshot brought back one it
  -- released since) is not a re-entry: it ends, as its release would end it, and the request
  -- takes the lock afresh, above its block. Its mark stays with the lock.
  redis.call('DEL', lock)
  retire_block(fence, token)
  holds, token = false, false
end
if holds then
  return reenter(lock, owner, lease, token)
end

if not token then
  if not free and redis.call('EXISTS', q) == 1 then
    return 'fair'
  end
  -- Our release must reach the requests of this process that still wait; and when we were told the
  -- lock is free, other managers may still be waiting behind us.
  local others = wait == 'wo' or wait == 'wor'
  if others or wait == 'wr' or marked then
    token = take(lock, owner, lease, next_token(fence), '#w', '1', '#m', meta_of(about))
  else
    token = take(lock, owner, lease, next_token(fence), '#m', meta_of(about))
  end
  if others then
    redis.call('ZADD', waiters, 'NX', int(now_us()), manager_of(owner))
    -- as in wait_in_line: the record goes some time after the lock would, should nobody come back
    live_at_least(waiters, tonumber(lease) + 10000)
  elseif wait == 'wr' then
    redis.call('ZREM', waiters, manager_of(owner))
  end
  return token
end

local ttl = redis.call('PTTL', lock)
if ttl < 0 then
  -- a lock without a lease (never made by these scripts): look again soon
  ttl = 50
end
if wait ~= '' then
  if redis.call('EXISTS', q) == 1 then
    -- fair requests queue behind the holder: its release grants the lock to them, and this
    -- request waits in their queue
    return 'fair'
  end
  wait_in_line(lock, waiters, manager_of(owner), ttl, lease, marked)
end
return -1 - ttl
