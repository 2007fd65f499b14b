-- Take a fair lock, or join its FIFO queue. A lock held in exclusive mode is waited for in the
-- same queue: its release grants it to the head. Managers recorded as waiting in exclusive mode
-- are woken, and queue too.
-- KEYS: lock hash, then, on a cluster only (see `plain_release.lua`): queue, this waiter's
--       heartbeat key, fencing counter, waiting managers (exclusive mode)
-- ARGV: owner, lease ms, will wait ('1'/'0'), already queued ('1'/'0'), eviction ms (heartbeat
--       deadline and claim lease), inbox channel prefix, this request's waiter ('<owner>|<n>'),
--       [the token of the owner's hold of the lock (absent: its manager knows of none), [the
--       lock's value, when that hold is a plain one ('' when none)], what `inspect` shows of the
--       hold or the wait: a tab, the label of the manager's process, a tab, the request it serves]
-- Returns the fencing token (> 0) when acquired; when busy, -1 - the lock's remaining lease in ms
-- (-1: try again at once, as when the lock is free with waiters left beyond a grant's bound);
-- when the lock is held or waited for in another family of modes (they are not mixed on one
-- lock), that family's name: 'read/write' or 'semaphore'.
local lock, owner, lease = KEYS[1], ARGV[1], ARGV[2]
local will_wait, queued = ARGV[3] == '1', ARGV[4] == '1'
local eviction, prefix, waiter = ARGV[5], ARGV[6], ARGV[7]
local about = ARGV[10]
local q, heartbeat = KEYS[2] or lock .. ':ql', KEYS[3] or lock .. ':hb:' .. waiter
local fence, waiters = KEYS[4] or lock .. ':f', KEYS[5] or lock .. ':w'

-- The common case, a free lock nobody waits for, in one call: the lock's state is read only when
-- one of the three keys exists.
if redis.call('EXISTS', lock, q, waiters) == 0 then
  if queued then
    redis.call('DEL', heartbeat)
  end
  return take(lock, owner, lease, next_token(fence), '#f', '1', '#m', meta_of(about))
end
local holds, token, marked, fair, shared, holder, plain = lock_state(lock, owner)
-- a grant to a wait of the owner (taken up or not): that wait's, whatever this request holds
local granted = fair and fair ~= '1' and owner_of(fair) == owner
if holder == owner and plain == ARGV[9] then
  -- The owner's own plain lock: a re-entry, which makes it a hash.
  unplain(lock, owner, ARGV[8])
  holds, token, marked, fair = '1', ARGV[8], '1', '1'
elseif holder == owner or (holds and not granted and token ~= ARGV[8]) then
  -- A hold of the owner that it does not have (a restart from a snapshot brought back one it
  -- released since) is not a re-entry: it ends, as its release would end it (a plain lock's
  -- token only its holder knew: the clock passed it), and the request takes the lock as a free
  -- one. (No other request of the owner has an answer on its way: see `turns.rs`.)
  if holder ~= owner then
    retire_block(fence, token)
  end
  redis.call('DEL', lock)
  holds, token, marked, fair = false, false, false, false
end
if shared then
  return shared_family(shared)
end
if holds and granted and not queued and token ~= ARGV[8] then
  -- A grant to a wait of the owner, which this request is not (it has not queued) and whose
  -- guard it does not have: another request's, taken up or about to be, or one whose guard was
  -- told it lost it. Busy for this request, as for any other's hold: sharing it would give one
  -- token to two guards.
  holds = false
end
if holds then
  if queued and granted then
    -- A grant whose message we have not received (or one made to an earlier wait of this owner
    -- that left without using it): it is ours, not a re-entry. It gets a new token and no longer
    -- names a wait, so that neither the message, should it still come, nor the earlier wait's
    -- withdrawal finds an unused grant to pass on from under us.
    -- the grant's block ends here: the new token is above it
    token = next_token(fence, tonumber(token) + TOKEN_BLOCK)
    redis.call('HSET', lock, '#t', int(token), '#f', '1')
    redis.call('PEXPIRE', lock, lease)
    return token
  end
  if queued then
    -- the owner holds the lock through another request (a grant it used, or a take): this one
    -- re-enters it, and waits no more
    redis.call('LREM', q, '1', waiter)
    redis.call('DEL', heartbeat)
  end
  return reenter(lock, owner, lease, token)
end

local more
if not token then
  -- free, but waited for
  wake_recorded(waiters, prefix, lock)
  local head = redis.call('LINDEX', q, '0')
  local ours = not head or head == waiter
  if not ours then
    -- free, but others queued first (the holder died, or a grant went astray): the head gets it
    local granted, _
    granted, _, more = grant_next(lock, q, fence, prefix, eviction, waiter)
    if granted == waiter then
      -- the waiters ahead of us were dead: the lock came to us
      redis.call('PEXPIRE', lock, lease)
      return tonumber(redis.call('HGET', lock, '#t'))
    elseif not granted then
      -- every waiter skipped was dead; live ones may remain ahead of us
      head = redis.call('LINDEX', q, '0')
      ours = not head or head == waiter
    end
  end
  if ours then
    redis.call('DEL', heartbeat)
    -- taken by the request itself, which learns of it from the answer: no wait is named
    if head then
      -- waiters may remain behind us: our release looks at the queue
      redis.call('LPOP', q)
      return take(lock, owner, lease, next_token(fence), '#f', '1', '#w', '1', '#m', meta_of(about))
    end
    return take(lock, owner, lease, next_token(fence), '#f', '1', '#m', meta_of(about))
  end
end

if will_wait then
  join_queue(q, heartbeat, waiter, eviction, queued, meta_of(about))
  -- the holder's release must look at the queue (a free lock has none: its taker marks it; a
  -- mark made here would make it a hash without an expiry)
  if token and not marked then
    redis.call('HSET', lock, '#w', '1')
  end
  if not fair then
    -- held in exclusive mode: managers may wait for it in that mode
    wake_recorded(waiters, prefix, lock)
  end
end
if more then
  -- the lock is free, and waiters ahead of us may all be dead: look again at once
  return -1
end
local ttl = redis.call('PTTL', lock)
if ttl < 0 then
  ttl = 0
end
return -1 - ttl
