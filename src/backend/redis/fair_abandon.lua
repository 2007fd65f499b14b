-- A fair waiter stopped waiting: leave the queue; if the lock was granted to this very wait
-- meanwhile (its '#f' names the wait), the grant was never used: drop it (another request of the
-- same owner may have re-entered it: only the grant's own hold goes), and when that frees the
-- lock, pass it on to the next waiter.
-- KEYS: lock hash, queue, this waiter's heartbeat key, fencing counter
-- ARGV: owner, the waiter ('<owner>|<n>'), inbox channel prefix, claim lease ms
-- Returns 1 when an unused grant was dropped, else 0; 'more' when the grant of the freed lock
-- stopped at its bound with waiters left (the manager grants on at once).
local lock, q, heartbeat, fence = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local owner, waiter = ARGV[1], ARGV[2]
redis.call('LREM', q, '1', waiter)
redis.call('DEL', heartbeat)
-- (a plain lock, whose read as a hash fails, is granted to nobody)
if redis.pcall('HGET', lock, '#f') ~= waiter then
  return 0
end
-- the grant is dropped once: its wait no longer names it
redis.call('HSET', lock, '#f', '1')
local held = redis.call('HMGET', lock, owner, '#t')
if held[1] == '1' then
  redis.call('DEL', lock)
  retire_block(fence, held[2])
  local _, _, more = grant_next(lock, q, fence, ARGV[3], ARGV[4])
  if more then
    return 'more'
  end
else
  redis.call('HINCRBY', lock, owner, '-1')
end
return 1
