-- Push back the eviction deadline of many queued waiters of fair and shared locks (the watchdog's
-- batch).
-- KEYS: per waiter, its lock hash, queue and heartbeat key
-- ARGV: eviction ms
-- Returns per waiter: 0 no longer queued (granted, dropped as dead, or its heartbeat ran out), 1
-- queued behind a holder, 2 queued while the lock may have room (a grant expired unused, a
-- holder's lease ran out, a grant stopped at its bound and its caller never carried it on): the
-- waiter should retry now, and its attempt grants the room.
local eviction = ARGV[1]
local states = {}
-- queues whose expiry this batch has pushed back already
local kept = {}
local now
for i = 1, #KEYS / 3 do
  local lock, q, heartbeat = KEYS[3 * i - 2], KEYS[3 * i - 1], KEYS[3 * i]
  -- a waiter is queued while its heartbeat key lives: granted, it was deleted; dead, it ran out
  if redis.call('PEXPIRE', heartbeat, eviction) == 1 then
    -- a queue lives as long as the heartbeat key of its longest-lived waiter: once every waiter
    -- has died, it goes too
    if not kept[q] then
      redis.call('PEXPIRE', q, eviction)
      kept[q] = true
    end
    if redis.call('EXISTS', lock) == 0 then
      states[i] = 2
    elseif string.sub(q, -3) == ':qs' then
      -- a shared lock: its hash names its family while anyone waits
      live_at_least(lock, tonumber(eviction))
      now = now or now_ms()
      local first = redis.call('ZRANGE', lock .. ':s', 0, 0, 'WITHSCORES')
      local head = redis.call('LINDEX', q, 0)
      local head_beat = head and heartbeat_key(lock, head)
      -- (a plain lock, whose read as a hash fails, has no family)
      local family = redis.pcall('HGET', lock, '#s')
      if not (first[2] and tonumber(first[2]) > now) then
        states[i] = 2
      elseif head_beat and head_beat ~= heartbeat and redis.call('EXISTS', head_beat) == 0 then
        -- the head of the queue died: the waiters behind it may fit beside the holders
        states[i] = 2
      elseif head and type(family) == 'string'
        and has_room(lock, lock .. ':s', family, string.sub(head, -1)) then
        -- the head fits beside the holders, yet nobody granted it the room
        states[i] = 2
      else
        states[i] = 1
      end
    else
      states[i] = 1
    end
  else
    states[i] = 0
  end
end
return states
