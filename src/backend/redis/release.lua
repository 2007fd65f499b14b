-- Release one hold of an exclusive lock; when the last hold goes, tell one waiting manager.
-- KEYS: lock hash, waiting managers
-- ARGV: owner, inbox channel prefix
-- Returns -1 when the owner did not hold the lock, else the holds left (0: freed).
local lock, waiters = KEYS[1], KEYS[2]
local left = drop_hold(lock, ARGV[1])
if left ~= 0 then
  return left
end
notify_next(waiters, ARGV[2], lock)
return 0
