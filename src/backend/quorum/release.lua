-- Release one hold of a quorum lock on one master, or undo an attempt there. Bound to the hold:
-- by the token this master issued for it, or, when that is not known (the master's answer never
-- came), by the attempt that took it here afresh ('#a'). An owner's later hold is never touched.
-- When the last hold goes, tell one waiting manager other than `skip` (a release skips its own
-- manager: the quorum backend wakes its next local waiter itself, once, not once per master).
-- KEYS: lock hash, waiting managers
-- ARGV: owner, inbox channel prefix, manager to skip ('' none), this master's token of the hold
--       ('' unknown), the attempt that took it afresh
-- Returns -1 when the hold is not here, else the holds left (0: freed).
local lock, waiters, owner = KEYS[1], KEYS[2], ARGV[1]
local token = ARGV[4]
if token == '' then
  local made = redis.call('HMGET', lock, '#a', '#t')
  if made[1] ~= ARGV[5] then
    return -1
  end
  token = made[2]
end
local left = drop_hold(lock, owner, token)
if left ~= 0 then
  return left
end
notify_next(waiters, ARGV[2], lock, ARGV[3])
return 0
