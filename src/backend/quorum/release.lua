-- Release one hold of a quorum lock on one master; when the last hold goes, tell one waiting
-- manager OTHER than the releasing one (the quorum backend wakes its own next waiter directly, so
-- that one release wakes one local waiter, not one per master).
-- KEYS: lock hash, waiting managers
-- ARGV: owner, inbox channel prefix, releasing manager id
-- Returns -1 when the owner did not hold the lock, else the holds left (0: freed).
local lock, waiters = KEYS[1], KEYS[2]
if redis.call('HEXISTS', lock, ARGV[1]) == 0 then
  return -1
end
local left = redis.call('HINCRBY', lock, ARGV[1], -1)
if left > 0 then
  return left
end
redis.call('DEL', lock)
while true do
  local head = redis.call('ZPOPMIN', waiters)
  if #head == 0 then
    return 0
  end
  if head[1] ~= ARGV[3] and redis.call('PUBLISH', ARGV[2] .. head[1], lock) > 0 then
    return 0
  end
end
