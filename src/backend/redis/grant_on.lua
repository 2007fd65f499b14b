-- Carry on a grant that stopped at its bound (MAX_LOOKED, MAX_GRANTED in the helpers) with
-- waiters left: the script that made it answered 'more', and its manager calls this one at once,
-- again while it answers 'more'. A free exclusive or fair lock goes to the first live waiter of
-- its queue; a shared lock's room to the waiters at the head of its queue. A lock held in
-- exclusive or fair mode meanwhile is left alone: its release grants it.
-- KEYS: lock hash, fair queue, fencing counter, holders (shared), shared queue
-- ARGV: inbox channel prefix, claim lease ms
-- Returns 'more' when this call stopped at its bound too, else 0.
local lock, q, fence, holders, qs = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
-- (a plain lock, whose read as a hash fails, is held)
local family = redis.pcall('HGET', lock, '#s')
local _, more
if type(family) == 'string' then
  purge(lock, holders, now_ms())
  _, _, more = grant_shared(lock, holders, qs, fence, family, ARGV[1], ARGV[2])
  tidy_shared(lock, holders, qs)
elseif not family and redis.call('EXISTS', lock) == 0 then
  _, _, more = grant_next(lock, q, fence, ARGV[1], ARGV[2])
end
if more then
  return 'more'
end
return 0
