-- Release one hold of an exclusive or fair lock. When the last hold goes, the lock is granted to
-- the first live waiter of its fair queue; if there is none, one manager waiting in exclusive mode
-- is told. Only a lock marked '#w' (a manager or a fair request may wait for it) looks at its
-- waiters: every way of waiting for a lock marks it, but for a plain lock, whose release looks.
-- KEYS: lock hash, waiting managers, the lock's fair queue, fencing counter
-- ARGV: owner, inbox channel prefix, claim lease ms, [fencing token of the hold (absent: any hold
--       of the owner)], [for a plain lock (see common.lua), which always gives the token: 'p'
--       when the hold's block of tokens may still be ahead of the clock, 'P' when the hold
--       outlasted it; and the lock's value]
-- Returns -1 when the owner did not hold the lock (under that token), else the holds left (0:
-- freed); when the lock went to a waiter of the owner's own manager, the grant
-- ('g|<lock>|<waiter>|<token>'), which that manager hands to its waiter instead of a message.
local lock, waiters, owner, token, plain = KEYS[1], KEYS[2], ARGV[1], ARGV[4], ARGV[5]
-- A plain lock's value names its hold. Nobody marks it: whoever waits for it has a queue or a
-- record. A hash found where a plain lock was named was made of it by a re-entry, and is
-- released as a hash, by the token; a plain lock found where a hash was named is another
-- holder's (its read as a hash fails).
local state
if plain then
  local held = redis.pcall('GET', lock)
  if type(held) == 'table' then
    -- made a hash by a re-entry: released as one, by its token
    plain = nil
  else
    state = { held == ARGV[6] and '1' or false, 'plain', token }
  end
end
if not plain then
  state = redis.pcall('HMGET', lock, owner, '#w', '#t')
end
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
if plain ~= 'P' then
  retire_block(KEYS[4], state[3])
end
if not state[2] or (plain and redis.call('EXISTS', waiters, KEYS[3]) == 0) then
  -- nobody may wait: a release that returns here never defines the helpers below
  return 0
end
local granted, grant = grant_next(lock, KEYS[3], KEYS[4], ARGV[2], ARGV[3], nil, owner)
if not granted then
  notify_next(waiters, ARGV[2], lock)
end
return grant or 0
