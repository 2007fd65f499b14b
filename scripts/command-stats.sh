#!/usr/bin/env bash
# Redis's commands per HTTP request of one `http_load` variant, from INFO commandstats: two replicas
# of the example's service on a redis-server of their own, loaded by two `wrk -t1 -c32 -d5s` over
# K accounts.
# Usage: cargo build --release --example http_load
#        scripts/command-stats.sh layer-fair [K]     # variants: layer-exclusive, layer-fair, setnx
set -euo pipefail
variant="${1:?variant}"; keys="${2:-100}"; port="${PORT:-7393}"
bin="${HTTP_LOAD_BIN:-target/release/examples/http_load}"
dir=$(mktemp -d)
redis-server --port "$port" --save "" --appendonly no --daemonize yes --logfile "$dir/redis.log" >/dev/null
trap 'kill $a $b 2>/dev/null; redis-cli -p "$port" shutdown nosave >/dev/null 2>&1; rm -rf "$dir"' EXIT
sleep 0.3
"$bin" serve "$variant" 18091 "redis://127.0.0.1:$port" & a=$!
"$bin" serve "$variant" 18092 "redis://127.0.0.1:$port" & b=$!
sleep 1
# each wrk seeds its draws with its port: unseeded, both would draw the same accounts
cat > "$dir/keys.lua" <<LUA
init = function(args) math.randomseed(tonumber(args[1])) end
request = function() return wrk.format('PUT', '/accounts/' .. math.random($keys)) end
LUA
redis-cli -p "$port" config resetstat >/dev/null
wrk -t1 -c32 -d5s -s "$dir/keys.lua" http://127.0.0.1:18091 -- 18091 > "$dir/w1.txt" & first=$!
wrk -t1 -c32 -d5s -s "$dir/keys.lua" http://127.0.0.1:18092 -- 18092 > "$dir/w2.txt"
wait "$first"
sleep 1
requests=$(cat "$dir/w1.txt" "$dir/w2.txt" | awk '/requests in/ {s += $1} END {print s}')
echo "$variant K=$keys: $requests requests"
redis-cli -p "$port" info commandstats | tr -d '\r' | grep -E 'cmdstat_(evalsha|publish|get|set):' |
  awk -F'[:=,]' -v r="$requests" '{printf "%-18s calls/request %.3f  usec/request %.2f  usec/call %s\n", $1, $3 / r, $5 / r, $7}'
