-- Helpers of the tower-lock scripts, one definition per paragraph: each script is assembled from
-- its body and the helpers it uses (scripts.rs). A helper uses only helpers defined above it.

-- Redis server time in microseconds: the only clock the scripts trust. It is read once per script
-- call (a release that grants the lock needs it twice): a script runs at once, and Redis itself
-- checks every expiry during a script against the time the script began.
local clock_us
local function now_us()
  if not clock_us then
    local t = redis.call('TIME')
    clock_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
  end
  return clock_us
end

-- A whole number as a decimal string: redis.call would format a Lua number as a double (slow, and
-- Lua itself prints large numbers in exponent form). '%d' formats it as a 64-bit integer.
local function int(n)
  return string.format('%d', n)
end

-- Tokens reserved with every acquisition: its own and the ones after it, which a manager hands
-- to the next requests of its process without asking Redis (lock cohorting, `cohort.rs`).
local TOKEN_BLOCK = 64

-- The next fencing token of a lock whose holds keep their blocks (shared locks, and a quorum's
-- masters): above the last block of tokens reserved, and never below the server's clock in
-- microseconds. The clock is the floor that survives what the counter does not: its expiry when
-- the lock idles (60 s), a restart from a snapshot or an AOF that lost its last writes, a failover
-- to a replica that lagged. Tokens therefore strictly increase as long as the clock of whichever
-- server issues them does not go back, and a lock is acquired in Redis less than once every
-- TOKEN_BLOCK microseconds on average. On a quorum, tokens of different masters also compare as
-- their clocks do. One call in the usual case: SET ... GET stores the end of the new block and
-- returns the last one; only when that was not below the clock is it set again.
local function reserve_token(fence)
  local now = now_us()
  local last = tonumber(redis.call('SET', fence, int(now + TOKEN_BLOCK - 1), 'PX', '60000', 'GET') or '0')
  if last < now then
    return now
  end
  redis.call('SET', fence, int(last + TOKEN_BLOCK), 'PX', '60000')
  return last + 1
end

-- The next fencing token of an exclusive or fair lock: as the one above, but the counter is only
-- read. Such a lock's hash keeps its token while it is held, and so the end of its block; the
-- script that ends the hold retires the block (`retire_block`). `floor` (optional): a token the
-- next one must reach (a block that ends in this script).
local function next_token(fence, floor)
  local token = math.max(now_us(), tonumber(redis.call('GET', fence) or '0') + 1)
  return math.max(token, floor or 0)
end

-- A hold of an exclusive or fair lock made under `token` (a decimal string) ends: when its block
-- may still be ahead of the clock (the hold lasted less than TOKEN_BLOCK µs), the counter keeps
-- its end for the next token. A hold whose lease ran out lasted a millisecond at least.
local function retire_block(fence, token)
  local last = tonumber(token) + TOKEN_BLOCK - 1
  if last >= now_us() and last > tonumber(redis.call('GET', fence) or '0') then
    redis.call('SET', fence, int(last), 'PX', '60000')
  end
end

-- What `inspect.lua` shows of a hold or a wait: when it began (server µs), then what its caller
-- sent in one argument (`about`): a tab, its manager's process label, a tab, the request it serves.
local function meta_of(about)
  return int(now_us()) .. (about or '\t\t')
end

-- The meta of a hold granted now to a wait whose meta is `wait` (false: the wait recorded none).
local function granted_meta(wait)
  return int(now_us()) .. (wait and string.match(wait, '\t.*$') or '\t\t')
end

-- Make `owner` the holder of the free `lock` for `lease` ms (a decimal string, as the script got it)
-- under fencing token `token`, with the marks that follow as field-value pairs (strings): '#w'
-- (requests may wait for it: its release looks at the fair queue and the waiting managers) and
-- '#f' (a fair lock, whose value names the wait it was granted to, or '1': a grant is bound to its
-- wait).
local function take(lock, owner, lease, token, ...)
  redis.call('HSET', lock, owner, '1', '#t', int(token), ...)
  redis.call('PEXPIRE', lock, lease)
  return token
end

-- One more hold of `owner` on the lock it holds under `token`, for `lease` ms (a decimal string);
-- the lease never shrinks. Returns the token.
local function reenter(lock, owner, lease, token)
  redis.call('HINCRBY', lock, owner, '1')
  if redis.call('PTTL', lock) < tonumber(lease) then
    redis.call('PEXPIRE', lock, lease)
  end
  return tonumber(token)
end

-- A lock taken on the plain path (`plain/mod.rs`: SET NX, no script) is a string: its holder's
-- owner id (after a '!' when taken in fair mode), '|' and a number that tells the owner's holds
-- apart, with the lease as its expiry. Its token is known to its holder alone. It has one hold and
-- no marks, and its release looks for waiters itself: a cohort's leader's owner id is made for the
-- one hold, and a fair request that re-enters its own plain lock first makes it a hash (below).
-- Its release keeps the last token handed out under it in the counter only when the server's
-- clock may not have passed it, as its holder tells from the clock the plain path read and its
-- own clock since: tokens then also rest on the holder's clock not running 1 % faster than the
-- server's. `hash_fields` reads fields of a lock's hash; of a
-- plain lock it gives false and the lock's value.
local function hash_fields(lock, ...)
  local state = redis.pcall('HMGET', lock, ...)
  if state.err then
    return false, redis.call('GET', lock)
  end
  return state
end

-- What `owner` has of `lock`, in one call: its holds (false: none), the lock's token (false: the
-- lock is free; every held lock has one; 'plain' for a plain lock), its '#w' mark (false: no
-- manager waits for it; a plain lock counts as marked), its '#f' mark (false: not held in fair
-- mode; '1' for a plain lock taken in fair mode) and its '#s' mark (the family of a shared lock:
-- a read/write lock or a semaphore holds or queues for it; false: none); for a plain lock, its
-- holder and its value too.
local function lock_state(lock, owner)
  local state, plain = hash_fields(lock, owner, '#t', '#w', '#f', '#s')
  if not state then
    local fair = string.byte(plain) == 33 and '1' or false
    return false, 'plain', '1', fair, false, string.match(plain, '^!?([^|]*)'), plain
  end
  return state[1], state[2], state[3], state[4], state[5]
end

-- Make `owner`'s plain lock taken in fair mode a hash held under `token` (a decimal string: its
-- holder's word, as only it knows the token), keeping its lease. It is marked: whoever waits for
-- a plain lock never marked it.
local function unplain(lock, owner, token)
  local ttl = redis.call('PTTL', lock)
  local value = redis.call('GETDEL', lock)
  local meta = value and string.match(value, '\t(.*)$') or '\t\t'
  take(lock, owner, int(math.max(ttl, 1)), tonumber(token), '#f', '1', '#w', '1', '#m', meta)
end

-- The answer of an acquire script for a lock held or waited for as a shared lock of `family`:
-- the family's name.
local function shared_family(family)
  return string.sub(family, 1, 1) == 'r' and 'read/write' or 'semaphore'
end

-- The manager of an owner id ('<manager id>:<n>').
local function manager_of(owner)
  return string.match(owner, '^[^:]+')
end

-- Whether `manager` may listen on its inbox channel (whose name is `prefix` and its id): a
-- manager that died no longer does, and none of its waiters is granted anything. `heard` keeps
-- what one script call learned (nobody subscribes or leaves while a script runs), so that a dead
-- manager's thousands of waiters cost one look, not one grant undone each. A user whose ACL
-- refuses PUBSUB NUMSUB learns it from a grant's message that reached nobody (the grant's
-- script then sets `heard[manager]` false).
local function listens(prefix, manager, heard)
  local known = heard[manager]
  if known == nil and not heard['#refused'] then
    local subscribers = redis.pcall('PUBSUB', 'NUMSUB', prefix .. manager)
    if subscribers.err then
      heard['#refused'] = true
    else
      known = subscribers[2] > 0
      heard[manager] = known
    end
  end
  return known ~= false
end

-- A renewal by the holder deletes the takeover mark of its hold, the key `mark` (DESIGN.md, "Dead
-- holders": '<lock>:d', or '<lock>:d:<owner>' for a shared hold): a probe that saw the holder's
-- manager missing before it no longer counts. Only a holder whose manager id names a grace
-- ('<uuid>g<ms>') can have one; `owner` may be a plain lock's value.
local function clear_mark(mark, owner)
  if string.find(owner, 'g%d+:') then
    redis.call('DEL', mark)
  end
end

-- Make `key` live at least `ms` more milliseconds (a number), never less than it would have: the
-- waiting-managers record is shared by requests with different leases, and a short one must not
-- cut the record another manager still sleeps on. (A key without expiry gets one.)
local function live_at_least(key, ms)
  if redis.call('PTTL', key) < ms then
    redis.call('PEXPIRE', key, int(ms))
  end
end

-- Record that `manager` waits for the held `lock` (whose remaining lease is `ttl` ms; `lease` is the
-- waiter's, a decimal string), and mark the lock so that its release looks for waiting managers.
local function wait_in_line(lock, waiters, manager, ttl, lease, marked)
  redis.call('ZADD', waiters, 'NX', int(now_us()), manager)
  live_at_least(waiters, math.max(ttl, 0) + tonumber(lease) + 10000)
  if not marked then
    redis.call('HSET', lock, '#w', '1')
  end
end

-- Tell the longest-waiting manager that still listens that `lock` is free. A manager that died is
-- dropped: PUBLISH reaches nobody on its channel. The manager `skip` (optional) is dropped without
-- being told.
local function notify_next(waiters, prefix, lock, skip)
  while true do
    local head = redis.call('ZPOPMIN', waiters)
    if #head == 0 then
      return
    end
    if head[1] ~= skip and redis.call('PUBLISH', prefix .. head[1], lock) > 0 then
      return
    end
  end
end

-- Wake every manager recorded as waiting for `lock` in exclusive mode, and forget them all: the
-- lock is being taken or queued for in fair mode, whose releases grant it to the queue and tell no
-- recorded manager. Each woken request finds the fair state and joins the queue.
local function wake_recorded(waiters, prefix, lock)
  local managers = redis.call('ZRANGE', waiters, 0, -1)
  for _, manager in ipairs(managers) do
    redis.call('PUBLISH', prefix .. manager, lock)
  end
  if #managers > 0 then
    redis.call('DEL', waiters)
  end
end

-- Drop one hold of `owner` on `lock` made under fencing token `token` (nil: any); the lock hash
-- goes with the last one. Returns -1 when the owner held none (under that token), else the holds
-- left.
local function drop_hold(lock, owner, token)
  local holds
  if token then
    local state = redis.call('HMGET', lock, owner, '#t')
    if state[2] ~= token then
      return -1
    end
    holds = tonumber(state[1])
  else
    holds = tonumber(redis.call('HGET', lock, owner))
  end
  if not holds then
    return -1
  end
  if holds <= 1 then
    redis.call('DEL', lock)
    return 0
  end
  return redis.call('HINCRBY', lock, owner, '-1')
end

-- Fair locks. The queue `q` is a list of waiters in order of arrival: joining is an RPUSH and each
-- grant an LPOP, whatever the queue's length. A waiter is one wait of one request,
-- '<owner id>|<n>': an owner that waits for a lock again (it gave up, then retried) is another
-- waiter, so a grant, a heartbeat or a withdrawal of the earlier wait never touches the later one.
-- A queued waiter is alive while its heartbeat key `<lock>:hb:<waiter>` exists: its manager's
-- heartbeats push the key's expiry back, and the key of a waiter whose process died runs out on
-- Redis's clock.
local function heartbeat_key(lock, waiter)
  return lock .. ':hb:' .. waiter
end

-- The owner id of a waiter ('<owner id>|<n>').
local function owner_of(waiter)
  return string.match(waiter, '^[^|]+')
end

-- Put `waiter` in the queue `q` (once) with its heartbeat key `heartbeat` alive for `eviction` ms
-- (a decimal string), its value the wait's `meta` (`meta_of`). `queued`: an earlier attempt of
-- this wait joined already; if its heartbeat
-- ran out meanwhile (its process was frozen or slow), it is still queued unless a grant found it
-- dead and dropped it. The queue outlives its waiters' heartbeat keys, never a queue of dead
-- waiters for ever.
local function join_queue(q, heartbeat, waiter, eviction, queued, meta)
  if not queued then
    redis.call('RPUSH', q, waiter)
    redis.call('SET', heartbeat, meta, 'PX', eviction)
  elseif redis.call('PEXPIRE', heartbeat, eviction) == 0 then
    if not redis.call('LPOS', q, waiter) then
      redis.call('RPUSH', q, waiter)
    end
    redis.call('SET', heartbeat, meta, 'PX', eviction)
  end
  redis.call('PEXPIRE', q, eviction)
end

-- One call of a grant script looks at this many queued waiters at most (a grant undone, as its
-- manager no longer listens, counts as ten): Redis runs one script at a time, and a queue may
-- hold thousands of dead waiters (a killed process's). A grant stopped by this bound with waiters
-- left and room for them says so ('more'): its caller calls again at once (`grant_on.lua`), and
-- a waiter that finds it so tries again at once. Should that caller die first, the heartbeats of
-- the waiters left find the room (`heartbeat.lua`).
local MAX_LOOKED = 1000

-- Make the longest-waiting live waiter the owner of the free lock `lock`, with a short claim lease
-- (`claim_ms`, a decimal string) that its manager extends, and tell its manager. A waiter whose
-- heartbeat ran out, or whose manager no longer listens, is dropped. `caller` (optional) is the
-- waiter running this script: it learns of a grant from the script's answer, not from a message.
-- `releaser` (optional) is an owner whose manager runs this script: a grant to a waiter of that
-- manager is not published but returned, and the manager hands it to the waiter from the
-- script's answer (one message less for Redis to write and for the manager to read).
-- Returns the waiter the lock was granted to, false when nobody got it; for a waiter of the
-- releaser's manager, the grant ('g|<lock>|<waiter>|<token>'); and whether it stopped at
-- MAX_LOOKED with waiters left (the lock is then free).
local function grant_next(lock, q, fence, prefix, claim_ms, caller, releaser)
  -- a grant undone below (its manager no longer listens) leaves its block to the next one
  local floor
  local heard, here = {}, releaser and manager_of(releaser)
  local budget = MAX_LOOKED
  while budget > 0 do
    budget = budget - 1
    local head = redis.call('LPOP', q)
    if not head then
      return false
    end
    local manager = manager_of(head)
    -- deleting the heartbeat key tells whether the waiter was alive, and clears it; its value
    -- is the wait's meta, which the hold keeps
    local beat = redis.call('GETDEL', heartbeat_key(lock, head))
    if beat and (head == caller or manager == here or listens(prefix, manager, heard)) then
      local meta = granted_meta(beat)
      -- waiters may remain behind the head: the new holder's release looks at the queue
      if head == caller then
        -- the caller learns of it from its script's answer: no wait is named
        take(lock, owner_of(head), claim_ms, next_token(fence, floor), '#f', '1', '#w', '1', '#m', meta)
        return head
      end
      local token = take(lock, owner_of(head), claim_ms, next_token(fence, floor), '#f', head, '#w', '1', '#m', meta)
      local grant = 'g|' .. lock .. '|' .. head .. '|' .. int(token)
      if manager == here then
        return head, grant
      end
      if redis.call('PUBLISH', prefix .. manager, grant) > 0 then
        return head
      end
      redis.call('DEL', lock)
      floor = token + TOKEN_BLOCK
      heard[manager] = false
      budget = budget - 9
    end
  end
  return false, nil, redis.call('EXISTS', q) == 1
end
