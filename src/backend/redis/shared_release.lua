-- Release one hold of a shared lock; when the owner's last hold goes, grant the room it leaves to
-- the waiters at the head of the queue.
-- KEYS: lock hash, holders, queue, fencing counter
-- ARGV: owner, inbox channel prefix, claim lease ms, [fencing token of the hold (absent: any hold
--       of the owner)]
-- Returns -1 when the owner did not hold the lock (under that token), else the holds left (0:
-- released); when the room went to waiters of the owner's own manager, their grants (one per
-- line), which that manager hands over instead of a message; and, when the grant stopped at its
-- bound with waiters left that may fit, a last line 'more' (the manager grants on at once).
local lock, holders, q, fence = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local owner, token = ARGV[1], ARGV[4]
if type(redis.pcall('HEXISTS', lock, '#s')) == 'table' then
  -- a plain lock (see common.lua), whose read as a hash fails: taken in exclusive
  -- mode after this hold ran out
  return -1
end
purge(lock, holders, now_ms())
local state = redis.call('HMGET', lock, owner, '#t:' .. owner, '#s')
if not state[1] or (token and state[2] ~= token) or not live_hold(lock, holders, owner) then
  return -1
end
if state[1] ~= '1' then
  return redis.call('HINCRBY', lock, owner, '-1')
end
drop_shared(lock, holders, owner)
local _, grants, more = grant_shared(lock, holders, q, fence, state[3], ARGV[2], ARGV[3], nil, owner)
tidy_shared(lock, holders, q)
if more then
  return grants and grants .. '\nmore' or 'more'
end
return grants or 0
