-- Take an exclusive reentrant lock on one master of a quorum, or record that this manager waits.
-- Unlike the single-server script, a win never records this manager as waiting: the attempt may
-- still fail on the other masters, and its undo must not wake this manager for a lock that stays
-- held elsewhere (that would turn every failed attempt into a retry loop). The quorum backend
-- wakes its own next waiter itself when it releases a lock it really held.
-- KEYS: lock hash (owner -> count, '#t' -> token, '#w' -> a manager may wait), waiting managers
--       (zset), fencing counter
-- ARGV: owner, lease ms, manager id, will wait ('1'/'0'), other local waiters remain ('1'/'0'),
--       attempt id (a fresh take records it as '#a', so that an undo whose answer never came can
--       find the hold this attempt made, and no other; a call of an earlier attempt than the
--       one that took the owner's hold here came late, and leaves that hold alone), the token this master issued for the
--       owner's hold of the lock ('' none: its manager knows of none; '*' not known), [what
--       `inspect` shows of the hold: a tab, the label of the manager's process, a tab, the
--       request it serves]
-- Returns {1, token, 0} when acquired, {1, token, 1} when re-entered (the owner held it here
-- already: token is that hold's), {0, pttl, 0} when busy or late.
local lock, waiters, fence = KEYS[1], KEYS[2], KEYS[3]
local owner, lease, manager = ARGV[1], ARGV[2], ARGV[3]
local will_wait, others = ARGV[4] == '1', ARGV[5] == '1'

local holds, token, marked = lock_state(lock, owner)
if holds and tonumber(redis.call('HGET', lock, '#a') or -1) > tonumber(ARGV[6]) then
  -- A later attempt of this manager took the owner's hold here: this call came late (behind a
  -- script reload, say), and what it knew of the hold is stale. It leaves that hold alone.
  return {0, redis.call('PTTL', lock), 0}
end
if holds and ARGV[7] ~= '*' and token ~= ARGV[7] then
  -- A hold of the owner that it does not have (a restart from a snapshot brought back one it
  -- released since) is not a re-entry: it goes, and the request takes the lock afresh.
  redis.call('DEL', lock)
  holds, token = false, false
end
if holds then
  return {1, reenter(lock, owner, lease, token), 1}
end

if not token then
  token = take(lock, owner, lease, reserve_token(fence), '#a', ARGV[6], '#m', meta_of(ARGV[8]))
  if will_wait and not others then
    redis.call('ZREM', waiters, manager)
  end
  return {1, token, 0}
end

local ttl = redis.call('PTTL', lock)
if will_wait then
  wait_in_line(lock, waiters, manager, ttl, lease, marked)
end
return {0, ttl, 0}
