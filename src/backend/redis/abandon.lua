-- A request of this manager stopped waiting for a lock.
-- KEYS: lock hash, waiting managers
-- ARGV: manager id, forget ('1': no request of this manager waits any more),
--       pass on ('1': it held a wake-up nobody here can use), inbox channel prefix
if ARGV[2] == '1' then
  redis.call('ZREM', KEYS[2], ARGV[1])
end
if ARGV[3] == '1' then
  if redis.call('EXISTS', KEYS[1]) == 0 then
    notify_next(KEYS[2], ARGV[4], KEYS[1])
  else
    -- taken meanwhile by someone never told of the waiters: its release must tell them (a plain
    -- lock's release looks for them itself; marking it fails, and leaves it as it was)
    redis.pcall('HSET', KEYS[1], '#w', '1')
  end
end
return 0
