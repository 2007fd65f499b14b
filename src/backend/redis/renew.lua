-- Renew many leases in one call (the watchdog's batch). A renewal only ever lengthens a lease
-- (PEXPIRE ... GT, Redis 7): another hold of the same owner may have been made with a longer one.
-- KEYS: lock hashes; ARGV: lease ms, then the owner of each lock in KEYS order.
-- Returns one 1 (renewed) or 0 (not held by that owner any more) per lock.
local renewed = {}
for i, lock in ipairs(KEYS) do
  if redis.call('HEXISTS', lock, ARGV[i + 1]) == 1 then
    redis.call('PEXPIRE', lock, ARGV[1], 'GT')
    renewed[i] = 1
  else
    renewed[i] = 0
  end
end
return renewed
