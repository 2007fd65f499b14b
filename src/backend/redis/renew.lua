-- Renew many leases in one call (the watchdog's batch). A renewal only ever lengthens a lease
-- (PEXPIRE ... GT, Redis 7): another hold of the same owner may have been made with a longer one.
-- A hold of a shared lock has its own lease, its expiry in the holders' zset, which a renewal
-- finds run out (the hold is lost) or lengthens. A renewal that finds a hold deletes its takeover
-- mark.
-- KEYS: lock hashes; ARGV: lease ms, then the owner of each lock in KEYS order ('=' and the
-- lock's value for a plain lock: see common.lua).
-- Returns one 1 (renewed) or 0 (not held by that owner any more) per lock.
local lease = ARGV[1]
local renewed = {}
local now
for i, lock in ipairs(KEYS) do
  local owner = ARGV[i + 1]
  renewed[i] = 0
  -- a plain lock (a string) read as a hash, or a hash read as a plain lock, is another holder's;
  -- but a plain lock of the owner may have become a hash, by a re-entry
  local state
  if string.byte(owner) == 61 then
    local value = string.sub(owner, 2)
    local held = redis.pcall('GET', lock)
    if held == value then
      redis.call('PEXPIRE', lock, lease, 'GT')
      clear_mark(lock .. ':d', value)
      renewed[i] = 1
    elseif type(held) == 'table' then
      owner = string.match(value, '^!?([^|]*)')
      state = redis.pcall('HMGET', lock, owner, '#s')
    end
  else
    state = redis.pcall('HMGET', lock, owner, '#s')
  end
  if not state or state.err then
    -- renewed as a plain lock, or another holder's
  elseif state[1] and not state[2] then
    redis.call('PEXPIRE', lock, lease, 'GT')
    clear_mark(lock .. ':d', owner)
    renewed[i] = 1
  elseif state[1] then
    now = now or now_ms()
    local holders = lock .. ':s'
    if tonumber(redis.call('ZSCORE', holders, owner) or '0') > now then
      redis.call('ZADD', holders, 'GT', int(now + tonumber(lease)), owner)
      clear_mark(lock .. ':d:' .. owner, owner)
      live_at_least(lock, tonumber(lease))
      live_at_least(holders, tonumber(lease))
      renewed[i] = 1
    end
  end
end
return renewed
