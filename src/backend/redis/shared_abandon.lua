-- A waiter of a shared lock stopped waiting: leave the queue; drop a grant made to this very wait
-- that it never used (another request of the owner may have re-entered it: only the grant's own
-- hold goes); then grant whatever room there is, since a write at the head may have held back
-- the reads behind it.
-- KEYS: lock hash, holders, queue, this waiter's heartbeat key, fencing counter
-- ARGV: owner, the waiter ('<owner>|<n>|<kind>'), inbox channel prefix, claim lease ms
-- Returns 1 when an unused grant was dropped, else 0; 'more' when the grant stopped at its bound
-- with waiters left that may fit (the manager grants on at once).
local lock, holders, q, heartbeat, fence = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local owner, waiter = ARGV[1], ARGV[2]
redis.call('LREM', q, '1', waiter)
redis.call('DEL', heartbeat)
-- (a plain lock, whose read as a hash fails, has no shared waiters)
local state = redis.pcall('HMGET', lock, '#s', owner, '#g:' .. owner)
if state.err or not state[1] then
  return 0
end
local dropped = 0
if state[3] == waiter then
  redis.call('HDEL', lock, '#g:' .. owner)
  if state[2] == '1' then
    drop_shared(lock, holders, owner)
  else
    redis.call('HINCRBY', lock, owner, '-1')
  end
  dropped = 1
end
purge(lock, holders, now_ms())
local _, _, more = grant_shared(lock, holders, q, fence, state[1], ARGV[3], ARGV[4])
tidy_shared(lock, holders, q)
if more then
  return 'more'
end
return dropped
