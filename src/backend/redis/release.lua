-- Release one hold of an exclusive or fair lock. When the last hold goes, the lock is granted to
-- the first live waiter of its fair queue; if there is none, one manager waiting in exclusive mode
-- is told. Only a lock marked '#w' (a manager or a fair request may wait for it) looks at its
-- waiters: every way of waiting for a lock marks it. A plain lock (see common.lua) has a release
-- of its own; one made a hash by a re-entry is released here, by its token.
-- KEYS: lock hash, then, on a cluster only (see `plain_release.lua`): waiting managers, the
--       lock's fair queue, fencing counter
-- ARGV: owner, the claim lease in ms and the inbox channel prefix as '<ms> <prefix>', [fencing
--       token of the hold (absent: any hold of the owner)]
-- Returns -1 when the owner did not hold the lock (under that token), else the holds left (0:
-- freed); when the lock went to a waiter of the owner's own manager, the grant
-- ('g|<lock>|<waiter>|<token>'), which that manager hands to its waiter instead of a message;
-- 'more' when the grant stopped at its bound with waiters left (the manager grants on at once).
local lock, owner, token = KEYS[1], ARGV[1], ARGV[3]
-- a plain lock found here is another holder's: its read as a hash fails
local state = redis.pcall('HMGET', lock, owner, '#w', '#t')
if state.err or (token and state[3] ~= token) then
  return -1
end
local holds = state[1]
if not holds then
  return -1
end
-- holds are whole numbers from '1' up: comparing strings spares a conversion
if holds ~= '1' then
  return redis.call('HINCRBY', lock, owner, '-1')
end
redis.call('DEL', lock)
local fence = KEYS[4] or lock .. ':f'
retire_block(fence, state[3])
-- A mark says somebody may wait; whoever did may have left (a grant marks the lock for the
-- waiters behind its head, and the queue may have had none). A release that returns here never
-- defines the helpers below.
if not state[2] then
  return 0
end
local waiters, q = KEYS[2] or lock .. ':w', KEYS[3] or lock .. ':ql'
if redis.call('EXISTS', waiters, q) == 0 then
  return 0
end
local claim_ms, prefix = string.match(ARGV[2], '^(%d+) (.*)$')
local granted, grant, more = grant_next(lock, q, fence, prefix, claim_ms, nil, owner)
if not granted then
  notify_next(waiters, prefix, lock)
end
if more then
  -- the lock is free, and live waiters may stand beyond the grant's bound: the manager grants on
  return 'more'
end
return grant or 0
