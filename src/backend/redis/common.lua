-- Helpers prepended to every tower-lock script.

-- Redis server time in microseconds: the only clock the scripts trust.
local function now_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

-- A whole number as a decimal string (Lua would print large numbers in exponent form).
local function int(n)
  return string.format('%.0f', n)
end

-- The next fencing token of a lock: one above the last one issued, and never below the server clock
-- in microseconds. The counter may therefore expire while the lock idles: the clock alone has moved
-- past every token issued before.
local function next_token(fence, now)
  local last = tonumber(redis.call('GET', fence) or '0')
  local token = math.max(last + 1, now)
  redis.call('SET', fence, int(token), 'PX', 60000)
  return token
end

-- Tell the longest-waiting manager that still listens that `lock` is free. A manager that died is
-- dropped: PUBLISH reaches nobody on its channel.
local function notify_next(waiters, prefix, lock)
  while true do
    local head = redis.call('ZPOPMIN', waiters)
    if #head == 0 then
      return
    end
    if redis.call('PUBLISH', prefix .. head[1], lock) > 0 then
      return
    end
  end
end
