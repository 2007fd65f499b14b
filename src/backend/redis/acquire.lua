-- Take an exclusive reentrant lock, or record that this manager waits for it.
-- KEYS: lock hash (owner -> count, '#t' -> token, '#w' -> a manager may wait), waiting managers
--       (zset), fencing counter
-- ARGV: owner, lease ms, manager id, will wait ('1'/'0'), other local waiters remain ('1'/'0'),
--       retry ('1': an earlier attempt of this request found the lock busy and recorded this
--       manager as waiting)
-- Returns {1, token} when acquired, {0, pttl} when busy.
local lock, waiters, fence = KEYS[1], KEYS[2], KEYS[3]
local owner, lease, manager = ARGV[1], tonumber(ARGV[2]), ARGV[3]
local will_wait, others, retry = ARGV[4] == '1', ARGV[5] == '1', ARGV[6] == '1'

local holds, token, marked = lock_state(lock, owner)
if holds then
  return {1, reenter(lock, owner, lease, token)}
end

if not token then
  -- Our release must reach the requests of this process that still wait; and when we were told the
  -- lock is free, other managers may still be waiting behind us.
  local waited = will_wait and (others or retry)
  token = take(lock, owner, lease, next_token(fence), waited)
  if will_wait and others then
    redis.call('ZADD', waiters, 'NX', int(now_us()), manager)
  elseif will_wait and retry then
    redis.call('ZREM', waiters, manager)
  end
  return {1, token}
end

local ttl = redis.call('PTTL', lock)
if will_wait then
  wait_in_line(lock, waiters, manager, ttl, lease, marked)
end
return {0, ttl}
