-- Read the whole state of one lock at one instant, changing nothing (`LockManager::inspect`).
-- KEYS: lock, then, on a cluster only: waiting managers, fair queue, shared queue, shared holders,
--       fencing counter
-- ARGV: how many waiters of each queue to return at most
-- Returns: the server time in µs; the lock's type ('none', 'string': a plain lock, 'hash'); its
-- PTTL; a plain lock's value (else false); the hash's fields and values; the shared holders and
-- the expiry of each (server ms); the fair queue; the shared queue; the waiting managers and
-- since when each waits (server µs); the fencing counter (false: none); the meta of each waiter
-- of the fair queue, then of the shared queue ('' when its heartbeat key is gone).
local lock = KEYS[1]
local waiters, q = KEYS[2] or lock .. ':w', KEYS[3] or lock .. ':ql'
local qs, holders, fence = KEYS[4] or lock .. ':qs', KEYS[5] or lock .. ':s', KEYS[6] or lock .. ':f'
local last = tonumber(ARGV[1]) - 1
local fair_q, shared_q = redis.call('LRANGE', q, 0, last), redis.call('LRANGE', qs, 0, last)
local metas = {}
for _, queue in ipairs({fair_q, shared_q}) do
  for _, waiter in ipairs(queue) do
    metas[#metas + 1] = redis.call('GET', heartbeat_key(lock, waiter)) or ''
  end
end
local kind = redis.call('TYPE', lock)['ok']
local plain, fields = false, {}
if kind == 'string' then
  plain = redis.call('GET', lock)
elseif kind == 'hash' then
  fields = redis.call('HGETALL', lock)
end
return {
  int(now_us()), kind, redis.call('PTTL', lock), plain, fields,
  redis.call('ZRANGE', holders, 0, -1, 'WITHSCORES'),
  fair_q, shared_q,
  redis.call('ZRANGE', waiters, 0, last, 'WITHSCORES'),
  redis.call('GET', fence), metas
}
