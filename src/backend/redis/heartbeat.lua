-- Push back the eviction deadline of many queued fair waiters (the watchdog's batch).
-- KEYS: per waiter, its lock hash, queue and heartbeat key
-- ARGV: eviction ms
-- Returns per waiter: 0 no longer queued (granted, dropped as dead, or its heartbeat ran out), 1 queued
-- behind a holder,
-- 2 queued while the lock is free (a grant expired unused): the waiter should retry now.
local eviction = ARGV[1]
local states = {}
-- queues whose expiry this batch has pushed back already
local kept = {}
for i = 1, #KEYS / 3 do
  local lock, q, heartbeat = KEYS[3 * i - 2], KEYS[3 * i - 1], KEYS[3 * i]
  -- a waiter is queued while its heartbeat key lives: granted, it was deleted; dead, it ran out
  if redis.call('SET', heartbeat, '1', 'PX', eviction, 'XX') then
    -- a queue lives as long as the heartbeat key of its longest-lived waiter: once every waiter
    -- has died, it goes too
    if not kept[q] then
      redis.call('PEXPIRE', q, eviction)
      kept[q] = true
    end
    if redis.call('EXISTS', lock) == 0 then
      states[i] = 2
    else
      states[i] = 1
    end
  else
    states[i] = 0
  end
end
return states
