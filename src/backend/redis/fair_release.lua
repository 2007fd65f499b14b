-- Release one hold of a fair lock; when the last hold goes, grant it to the next waiter.
-- KEYS: lock hash, queue, fencing counter
-- ARGV: owner, inbox channel prefix, claim lease ms, this manager's id
-- Returns -1 when the owner did not hold the lock, else the holds left (0: released), or, when the
-- lock went to a waiter of this manager (which no message tells), {0, that waiter, its token}.
local lock, q, fence = KEYS[1], KEYS[2], KEYS[3]
local left = drop_hold(lock, ARGV[1])
if left ~= 0 then
  return left
end
local next_owner, token = grant_next(lock, q, fence, ARGV[2], tonumber(ARGV[3]), nil, ARGV[4])
if token then
  return {0, next_owner, token}
end
return 0
