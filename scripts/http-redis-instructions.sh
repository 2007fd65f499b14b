#!/usr/bin/env bash
# Redis's instructions per HTTP request of one `http_load` variant: redis-server under valgrind's
# callgrind (the count does not move with the VM's hour as CPU time does), two replicas of the
# example's service, two `wrk -t1 -c16 -d8s` over K accounts. Redis runs ~50 times slower under
# callgrind, so it is the bound and its batches are larger than in `http_load`: compare builds or
# variants with this, not with `http_load`'s figures.
# Usage: cargo build --release --example http_load
#        scripts/http-redis-instructions.sh layer-fair [K]   # also layer-exclusive, setnx, rslock
# HTTP_LOAD_BIN picks another build of the example; OUT=<file> keeps the profile.
set -euo pipefail
variant="${1:?variant}"; keys="${2:-100}"; port="${PORT:-7396}"
bin="${HTTP_LOAD_BIN:-target/release/examples/http_load}"
dir=$(mktemp -d)
valgrind --tool=callgrind --callgrind-out-file="$dir/cg.out" \
    redis-server --port "$port" --save '' --appendonly no >"$dir/redis.log" 2>&1 &
server=$!
trap 'kill $a $b 2>/dev/null; redis-cli -p "$port" shutdown nosave >/dev/null 2>&1; rm -rf "$dir"' EXIT
a=; b=
until redis-cli -p "$port" ping >/dev/null 2>&1; do
    kill -0 "$server" 2>/dev/null || { cat "$dir/redis.log"; exit 1; }
    sleep 0.2
done
"$bin" serve "$variant" 18191 "redis://127.0.0.1:$port" & a=$!
"$bin" serve "$variant" 18192 "redis://127.0.0.1:$port" & b=$!
sleep 2
# each wrk seeds its draws with its port: unseeded, both would draw the same accounts
cat > "$dir/keys.lua" <<LUA
init = function(args) math.randomseed(tonumber(args[1])) end
request = function() return wrk.format('PUT', '/accounts/' .. math.random($keys)) end
LUA
redis-cli -p "$port" config resetstat >/dev/null
callgrind_control -z "$server" >/dev/null 2>&1
wrk -t1 -c16 -d8s -s "$dir/keys.lua" http://127.0.0.1:18191 -- 18191 > "$dir/w1.txt" & first=$!
wrk -t1 -c16 -d8s -s "$dir/keys.lua" http://127.0.0.1:18192 -- 18192 > "$dir/w2.txt"
wait "$first"
callgrind_control -d "$server" >/dev/null 2>&1
sleep 1
requests=$(cat "$dir/w1.txt" "$dir/w2.txt" | awk '/requests in/ {s += $1} END {print s}')
dump=$(ls -t "$dir"/cg.out.* | head -1)
instructions=$(sed -n 's/^summary: //p' "$dump")
calls() {
    redis-cli -p "$port" info commandstats | tr -d '\r' |
        sed -n "s/^cmdstat_$1:calls=\([0-9]*\),.*/\1/p"
}
scripts=$(calls evalsha); published=$(calls publish)
echo "$variant K=$keys: $requests requests, $((instructions / requests)) Redis instructions" \
    "per request, $(echo "scale=2; ${scripts:-0} / $requests" | bc) script calls and" \
    "$(echo "scale=3; ${published:-0} / $requests" | bc) PUBLISH per request"
if [ -n "${OUT:-}" ]; then cp "$dump" "$OUT"; fi
