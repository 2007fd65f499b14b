-- Release one hold of a fair lock; when the last hold goes, grant it to the next waiter.
-- KEYS: lock hash, queue, fencing counter
-- ARGV: owner, inbox channel prefix, claim lease ms, [fencing token of the hold (absent: any hold
--       of the owner)]
-- Returns -1 when the owner did not hold the lock (under that token), else the holds left (0:
-- released).
local lock, q, fence = KEYS[1], KEYS[2], KEYS[3]
local left = drop_hold(lock, ARGV[1], ARGV[4])
if left ~= 0 then
  return left
end
grant_next(lock, q, fence, ARGV[2], ARGV[3])
return 0
