-- Take a hold of a shared lock (read, write or permit), or join its FIFO queue.
-- KEYS: lock hash, holders (zset), queue, this waiter's heartbeat key, fencing counter, waiting
--       managers (exclusive mode), fair queue
-- ARGV: owner, lease ms, will wait ('1'/'0'), already queued ('1'/'0'), eviction ms (heartbeat
--       deadline and claim lease), inbox channel prefix, this request's waiter
--       ('<owner>|<n>|<kind>', or the owner when the request does not wait), family ('rw', or
--       's' and the number of permits), kind ('r' read, 'w' write, 'n' permit), [the token of
--       the owner's hold of the lock (absent or '': its manager knows of none), what `inspect`
--       shows of the hold or the wait: a tab, the label of the manager's process, a tab, the
--       request it serves]
-- Returns the fencing token (> 0) when acquired; when busy, -1 - the time in ms until the first
-- holder's lease runs out (-1: try again at once, as when a grant stopped at its bound); when
-- the lock is held or waited for in another family of modes (or as a semaphore of another size),
-- the family's name: 'exclusive', 'fair', 'read/write' or 'semaphore'; 'upgrade' when the owner
-- holds a read and asks to write.
local lock, holders, q, heartbeat, fence = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local owner, lease = ARGV[1], ARGV[2]
local will_wait, queued = ARGV[3] == '1', ARGV[4] == '1'
local eviction, prefix, waiter, family, kind = ARGV[5], ARGV[6], ARGV[7], ARGV[8], ARGV[9]
local about = ARGV[11]

local other, plain = hash_fields(lock, '#s', '#t', '#f')
if not other then
  -- a plain lock: its value names its mode
  return string.byte(plain) == 33 and 'fair' or 'exclusive'
elseif other[1] ~= family then
  if other[1] then
    return shared_family(other[1])
  elseif other[2] then
    return other[3] and 'fair' or 'exclusive'
  elseif redis.call('EXISTS', KEYS[6]) == 1 then
    return 'exclusive'
  elseif redis.call('EXISTS', KEYS[7]) == 1 then
    return 'fair'
  end
end

local now = now_ms()
purge(lock, holders, now)
local held = redis.call('HMGET', lock, owner, '#x', '#g:' .. owner, '#t:' .. owner)
if held[1] and not held[3] and held[4] ~= ARGV[10] then
  -- A hold of the owner that it does not have (a restart from a snapshot brought back one it
  -- released since) is not a re-entry: it goes, and the request takes a hold afresh. (A grant
  -- to a wait of the owner is its wait's to take up.)
  drop_shared(lock, holders, owner)
  held[1] = false
end
if held[1] and live_hold(lock, holders, owner) then
  local expires = int(now + tonumber(lease))
  if queued and held[3] then
    -- A grant to a wait of this owner whose message we have not received (or that the wait left
    -- unused): ours, as a new hold. No wait names it any more, so that neither the message nor
    -- the earlier wait's withdrawal finds an unused grant to drop from under us.
    local token = reserve_token(fence)
    redis.call('HSET', lock, '#t:' .. owner, int(token))
    redis.call('HDEL', lock, '#g:' .. owner)
    redis.call('ZADD', holders, expires, owner)
    live_at_least(lock, tonumber(lease))
    live_at_least(holders, tonumber(lease))
    return token
  end
  if kind == 'w' and held[2] ~= owner then
    return 'upgrade'
  end
  if queued then
    redis.call('LREM', q, '1', waiter)
    redis.call('DEL', heartbeat)
  end
  redis.call('HINCRBY', lock, owner, '1')
  redis.call('ZADD', holders, 'GT', expires, owner)
  live_at_least(lock, tonumber(lease))
  live_at_least(holders, tonumber(lease))
  return tonumber(held[4])
end

local head = redis.call('LINDEX', q, 0)
local more
if head and head ~= waiter then
  -- others queued first; room may have opened with nobody told (a holder's lease ran out)
  local mine, _
  mine, _, more = grant_shared(lock, holders, q, fence, family, prefix, eviction, waiter)
  if mine then
    redis.call('ZADD', holders, int(now + tonumber(lease)), owner)
    live_at_least(lock, tonumber(lease))
    live_at_least(holders, tonumber(lease))
    return mine
  end
  head = redis.call('LINDEX', q, 0)
end
if (not head or head == waiter) and has_room(lock, holders, family, kind) then
  if head then
    redis.call('LPOP', q)
    redis.call('DEL', heartbeat)
  end
  return take_shared(lock, holders, fence, family, owner, kind, now, lease, meta_of(about))
end

if will_wait then
  join_queue(q, heartbeat, waiter, eviction, queued, meta_of(about))
  -- while anyone waits, the hash names the family, so that other families see the lock taken
  redis.call('HSET', lock, '#s', family)
  live_at_least(lock, tonumber(eviction))
end
if more then
  -- waiters beyond the grant's bound may fit: look again at once
  return -1
end
local first = redis.call('ZRANGE', holders, 0, 0, 'WITHSCORES')
local ttl = first[2] and tonumber(first[2]) - now or tonumber(eviction)
return -1 - math.max(ttl, 0)
