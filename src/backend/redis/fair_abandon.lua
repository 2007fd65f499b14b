-- A fair waiter stopped waiting: leave the queue; if the lock was granted to it meanwhile under the
-- given token and is still held by that grant alone, pass the lock on to the next waiter.
-- KEYS: lock hash, queue, this waiter's heartbeat key, fencing counter
-- ARGV: owner, release a grant ('1'/'0'), inbox channel prefix, claim lease ms,
--       token of the grant to release, the waiter ('<owner>|<n>')
local lock, q, heartbeat, fence = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
redis.call('LREM', q, '1', ARGV[6])
redis.call('DEL', heartbeat)
if ARGV[2] == '1' and redis.call('HGET', lock, '#t') == ARGV[5]
    and redis.call('HGET', lock, ARGV[1]) == '1' then
  redis.call('DEL', lock)
  grant_next(lock, q, fence, ARGV[3], ARGV[4])
  return 1
end
return 0
