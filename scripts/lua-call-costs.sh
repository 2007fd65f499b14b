#!/usr/bin/env bash
# What each kind of step of our Lua scripts costs inside Redis, without the network: each step runs
# 10,000 times in one EVAL, and the EVAL's time (INFO commandstats) is divided by 10,000.
# Usage: scripts/lua-call-costs.sh [port]   (a redis-server of your own; default 7100; it uses the
# keys lua-costs:k and lua-costs:f and deletes them)
set -euo pipefail
port="${1:-7100}"
cli() { redis-cli -p "$port" "$@"; }
cost() {
  local name="$1" body="$2"
  cli del lua-costs:k lua-costs:f >/dev/null
  cli config resetstat >/dev/null
  cli eval "for i = 1, 10000 do $body end" 2 lua-costs:k lua-costs:f >/dev/null
  local usec
  usec=$(cli info commandstats | tr -d '\r' | sed -n 's/^cmdstat_eval:calls=1,usec=\([0-9]*\),.*/\1/p')
  printf '%-58s %6.2f µs\n' "$name" "$(echo "$usec / 10000" | bc -l)"
}
cost "empty loop" ""
cost "HMGET of 3 fields, key missing" "redis.call('HMGET', KEYS[1], 'o', '#t', '#w')"
cost "HGET of 1 field, key missing" "redis.call('HGET', KEYS[1], 'o')"
cost "EXISTS, key missing" "redis.call('EXISTS', KEYS[1])"
cost "PTTL" "redis.call('PTTL', KEYS[1])"
cost "TIME, as now_us() reads it" "local t = redis.call('TIME') local n = tonumber(t[1]) * 1000000 + tonumber(t[2])"
cost "INCR" "redis.call('INCR', KEYS[2])"
cost "HSET of 2 fields + DEL (a new hash)" \
  "redis.call('HSET', KEYS[1], 'o', '1', '#t', '1763800000000000') redis.call('DEL', KEYS[1])"
cost "HSET of 2 fields + PEXPIRE + DEL" \
  "redis.call('HSET', KEYS[1], 'o', '1', '#t', '1763800000000000') redis.call('PEXPIRE', KEYS[1], '30000') redis.call('DEL', KEYS[1])"
cost "string.format('%d', n)" "local s = string.format('%d', 1763800000000000 + i)"
cost "tonumber(s)" "local n = tonumber('1763800000000000')"
cost "a table {1, n}" "local t = {1, i}"
cost "a local function (a helper defined on every call)" "local function f() return i end"
cli del lua-costs:k lua-costs:f >/dev/null
