-- Release one hold of a quorum lock on one master; when the last hold goes, tell one waiting
-- manager OTHER than the releasing one (the quorum backend wakes its own next waiter directly, so
-- that one release wakes one local waiter, not one per master).
-- KEYS: lock hash, waiting managers
-- ARGV: owner, inbox channel prefix, releasing manager id
-- Returns -1 when the owner did not hold the lock, else the holds left (0: freed).
local lock, waiters = KEYS[1], KEYS[2]
-- a master's tokens are its own: any hold of the owner
local left = drop_hold(lock, ARGV[1], nil)
if left ~= 0 then
  return left
end
notify_next(waiters, ARGV[2], lock, ARGV[3])
return 0
