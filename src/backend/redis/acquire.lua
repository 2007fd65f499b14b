-- Take an exclusive reentrant lock, or record that this manager waits for it.
-- KEYS: lock hash (owner -> count, '#t' -> token), waiting managers (zset), fencing counter
-- ARGV: owner, lease ms, manager id, will wait ('1'/'0'), other local waiters remain ('1'/'0')
-- Returns {1, token} when acquired, {0, pttl} when busy.
local lock, waiters, fence = KEYS[1], KEYS[2], KEYS[3]
local owner, lease, manager = ARGV[1], tonumber(ARGV[2]), ARGV[3]
local will_wait, others = ARGV[4] == '1', ARGV[5] == '1'

if redis.call('EXISTS', lock) == 0 then
  local now = now_us()
  local token = take(lock, fence, owner, lease, now)
  if will_wait then
    if others then
      -- our release must reach the requests of this process that still wait
      redis.call('ZADD', waiters, 'NX', now, manager)
    else
      redis.call('ZREM', waiters, manager)
    end
  end
  return {1, token}
end

if redis.call('HEXISTS', lock, owner) == 1 then
  return {1, reenter(lock, owner, lease)}
end

local ttl = redis.call('PTTL', lock)
if will_wait then
  redis.call('ZADD', waiters, 'NX', now_us(), manager)
  redis.call('PEXPIRE', waiters, math.max(ttl, 0) + lease + 10000)
end
return {0, ttl}
