-- Take a fair lock, or join its FIFO queue.
-- KEYS: lock hash, queue, queue deadlines, fencing counter
-- ARGV: owner, lease ms, will wait ('1'/'0'), already queued ('1'/'0'), eviction ms (heartbeat
--       deadline and claim lease), inbox channel prefix
-- Returns {1, token} when acquired, {0, pttl} when busy.
local lock, q, qt, fence = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local owner, lease = ARGV[1], tonumber(ARGV[2])
local will_wait, queued = ARGV[3] == '1', ARGV[4] == '1'
local eviction, prefix = tonumber(ARGV[5]), ARGV[6]

local holds, token = lock_state(lock, owner)
if holds then
  if queued then
    -- a grant whose message we did not receive: it is ours, not a re-entry
    redis.call('PEXPIRE', lock, lease)
    return {1, tonumber(token)}
  end
  return {1, reenter(lock, owner, lease, token)}
end

local now = now_us()
if not token then
  evict_dead(q, qt, math.floor(now / 1000))
  local head = redis.call('ZRANGE', q, 0, 0)[1]
  -- free, but others queued first (the holder died, or a grant went astray): the head gets it
  local granted = head and head ~= owner and grant_next(lock, q, qt, fence, prefix, eviction, now)
  if not granted then
    redis.call('ZREM', q, owner)
    redis.call('ZREM', qt, owner)
    return {1, take(lock, owner, lease, next_token(fence))}
  end
  if redis.call('HEXISTS', lock, owner) == 1 then
    -- the waiters ahead of us were dead: the grant came to us
    redis.call('PEXPIRE', lock, lease)
    return {1, tonumber(redis.call('HGET', lock, '#t'))}
  end
end

if will_wait then
  redis.call('ZADD', q, 'NX', now, owner)
  redis.call('ZADD', qt, math.floor(now / 1000) + eviction, owner)
end
local ttl = redis.call('PTTL', lock)
if ttl < 0 then
  ttl = 0
end
return {0, ttl}
