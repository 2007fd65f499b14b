-- Push back the eviction deadline of many queued fair waiters (the watchdog's batch).
-- KEYS: per waiter, its lock's queue and queue deadlines; ARGV: eviction ms, then one owner per waiter
-- Returns per waiter 1 (still queued) or 0 (no longer queued: granted, or evicted as dead).
local deadline = math.floor(now_us() / 1000) + tonumber(ARGV[1])
local alive = {}
for i = 1, #KEYS / 2 do
  local q, qt, owner = KEYS[2 * i - 1], KEYS[2 * i], ARGV[i + 1]
  if redis.call('ZSCORE', q, owner) then
    redis.call('ZADD', qt, 'XX', deadline, owner)
    alive[i] = 1
  else
    alive[i] = 0
  end
end
return alive
