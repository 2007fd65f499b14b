-- End every hold of a lock at once, whoever made it (`LockManager::force_release`, for
-- operators), and pass the lock on as a release does: a free exclusive or fair lock goes to the
-- first live waiter of its fair queue, else one waiting manager is told; a shared lock's room goes
-- to the waiters at the head of its queue. The fencing counter moves past every token the old
-- holders were given, their blocks included, so that the next token is above them all. The old
-- holders learn of it from their next renewal, which finds the hold gone.
-- KEYS: lock, waiting managers, fair queue, shared holders, shared queue, fencing counter
-- ARGV: inbox channel prefix, claim lease ms
-- Returns the holders whose holds ended (0: nobody held it), and 1 when the grant stopped at its
-- bound with waiters left (the manager grants on at once), else 0.
local lock, waiters, q, holders, qs, fence = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local prefix, claim_ms = ARGV[1], ARGV[2]
local kind = redis.call('TYPE', lock)['ok']
if kind == 'none' then
  return {0, 0}
end
-- a shared lock: every holder's block was reserved in the counter when it was granted
-- (`reserve_token`), so the next token is above them already
if kind == 'hash' and redis.call('HEXISTS', lock, '#s') == 1 then
  local family = redis.call('HGET', lock, '#s')
  purge(lock, holders, now_ms())
  local ended = 0
  for _, owner in ipairs(redis.call('ZRANGE', holders, 0, -1)) do
    drop_shared(lock, holders, owner)
    ended = ended + 1
  end
  local _, _, more = grant_shared(lock, holders, qs, fence, family, prefix, claim_ms)
  tidy_shared(lock, holders, qs)
  return {ended, more and 1 or 0}
end
if kind == 'hash' then
  -- an exclusive or fair lock: one owner, its block starts at the lock's token
  local token = redis.call('HGET', lock, '#t')
  if token then
    retire_block(fence, token)
  end
else
  -- a plain lock (see common.lua): its token, known to its holder alone, was the server's clock
  -- or one above the counter when it was taken, so its block ends within a block of the higher
  retire_block(fence, int(math.max(now_us(), tonumber(redis.call('GET', fence) or '0') + 1)))
end
redis.call('DEL', lock)
if redis.call('EXISTS', waiters, q) == 0 then
  return {1, 0}
end
local granted, _, more = grant_next(lock, q, fence, prefix, claim_ms)
if not granted then
  notify_next(waiters, prefix, lock)
end
return {1, more and 1 or 0}
