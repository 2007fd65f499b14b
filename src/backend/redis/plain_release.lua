-- Release a plain lock (a string: see common.lua), bound to its hold by the lock's value. The
-- uncontended release runs two or three commands and no helper: the holder knows which tokens it
-- handed out and whether the server's clock has passed them (`plain/mod.rs`).
-- KEYS: the lock, then, on a cluster only: waiting managers, the lock's fair queue, fencing
--       counter. Elsewhere the script names those after the lock (`names.rs`), as the scripts of
--       exclusive and fair locks do: ':w', ':ql', ':f'. Each key or argument costs Redis more than
--       a name the script builds; a cluster must be told every key, so that it refuses the call
--       before it runs, not halfway, while the lock's slot moves.
-- ARGV: the lock's value; the last token handed out under the hold, when the server's clock may
--       not have passed it yet (else empty); the claim lease in ms and the inbox channel prefix,
--       as '<ms> <prefix>'
-- Returns -1 when the lock does not hold that value (the hold was lost), -2 when it is a hash (a
-- re-entry made it one: the release script releases it by its token), else 0, the grant or
-- 'more' as the release script returns them.
local lock = KEYS[1]
local held = redis.pcall('GET', lock)
if held ~= ARGV[1] then
  return type(held) == 'table' and -2 or -1
end
redis.call('DEL', lock)
-- The counter keeps the last token for the next one to pass. It only grows: it was below this
-- hold's token when the lock was taken, and only a holder of the lock writes it.
if ARGV[2] ~= '' then
  redis.call('SET', KEYS[4] or lock .. ':f', ARGV[2], 'PX', '60000')
end
local waiters, q = KEYS[2] or lock .. ':w', KEYS[3] or lock .. ':ql'
if redis.call('EXISTS', waiters, q) == 0 then
  -- nobody waits: a release that returns here never defines the helpers below
  return 0
end
local claim_ms, prefix = string.match(ARGV[3], '^(%d+) (.*)$')
-- the value is the owner id after a '!' in fair mode, then '|' and the hold's number
local owner = string.match(ARGV[1], '^!?([^|]*)')
local granted, grant, more = grant_next(lock, q, KEYS[4] or lock .. ':f', prefix, claim_ms, nil, owner)
if not granted then
  notify_next(waiters, prefix, lock)
end
if more then
  -- the lock is free, and live waiters may stand beyond the grant's bound: the manager grants on
  return 'more'
end
return grant or 0
