#!/usr/bin/env bash
# Redis's commands per HTTP request of one `http_load` variant, from INFO commandstats: two replicas
# of the example's service on a redis-server of their own, loaded by two `wrk -t1 -c32 -d5s` over
# K accounts. Also the reads and writes Redis made per request (INFO stats): each read is a wake-up
# of the server for what its clients wrote since the last one.
# Usage: cargo build --release --example http_load
#        scripts/command-stats.sh layer-fair [K]     # variants: layer-exclusive, layer-fair,
#                                                    # setnx, rslock
#        CALLGRIND=1 scripts/command-stats.sh layer-fair [K]
# With CALLGRIND=1 redis-server runs under valgrind's callgrind, and the script prints Redis's
# instructions per request, which do not move with the VM's hour as CPU time does. Redis then runs
# ~50 times slower and is the bound (two `wrk -t1 -c16 -d8s`; its batches are larger than in
# `http_load`): compare builds or variants this way, not with `http_load`'s figures. OUT=<file>
# keeps the profile. HTTP_LOAD_BIN picks another build of the example. With MONITOR=1 a second
# run of 3 s follows, one second of it under MONITOR (which slows the server), and the script
# prints the script calls per request by the commands each ran: which paths the requests took.
# With SLOWLOG=1 a run of 3 s follows with one second of it in the SLOWLOG (every command, with its
# own microseconds), and the script prints each script's median time per call: its own time, not
# the round trip's (the log's upkeep adds to every command a script runs).
set -euo pipefail
variant="${1:?variant}"; keys="${2:-100}"; port="${PORT:-7393}"
bin="${HTTP_LOAD_BIN:-target/release/examples/http_load}"
dir=$(mktemp -d)
a=; b=; load=(-c32 -d5s)
trap 'kill $a $b 2>/dev/null; redis-cli -p "$port" shutdown nosave >/dev/null 2>&1; rm -rf "$dir"' EXIT
if [ "${CALLGRIND:-}" = 1 ]; then
    load=(-c16 -d8s)
    valgrind --tool=callgrind --callgrind-out-file="$dir/cg.out" \
        redis-server --port "$port" --save '' --appendonly no >"$dir/redis.log" 2>&1 &
    server=$!
else
    redis-server --port "$port" --save "" --appendonly no --daemonize yes --logfile "$dir/redis.log" >/dev/null
fi
until redis-cli -p "$port" ping >/dev/null 2>&1; do sleep 0.2; done
"$bin" serve "$variant" 18091 "redis://127.0.0.1:$port" & a=$!
"$bin" serve "$variant" 18092 "redis://127.0.0.1:$port" & b=$!
sleep 2
# each wrk seeds its draws with its port: unseeded, both would draw the same accounts
cat > "$dir/keys.lua" <<LUA
init = function(args) math.randomseed(tonumber(args[1])) end
request = function() return wrk.format('PUT', '/accounts/' .. math.random($keys)) end
LUA
cpu() { redis-cli -p "$port" info cpu | tr -d '\r' | awk -F: '/^used_cpu_(sys|user):/ {s += $2} END {print s}'; }
# `run WRK-ARGS...`: both replicas loaded at once
run() {
    wrk -t1 "$@" -s "$dir/keys.lua" http://127.0.0.1:18091 -- 18091 > "$dir/w1.txt" & first=$!
    wrk -t1 "$@" -s "$dir/keys.lua" http://127.0.0.1:18092 -- 18092 > "$dir/w2.txt"
    wait "$first"
}
redis-cli -p "$port" config resetstat >/dev/null
[ -z "${server:-}" ] || callgrind_control -z "$server" >/dev/null 2>&1
before=$(cpu)
run "${load[@]}"
after=$(cpu)
[ -z "${server:-}" ] || callgrind_control -d "$server" >/dev/null 2>&1
sleep 1
requests=$(cat "$dir/w1.txt" "$dir/w2.txt" | awk '/requests in/ {s += $1} END {print s}')
echo "$variant K=$keys: $requests requests;" \
    "Redis CPU per request $(awk -v a="$before" -v b="$after" -v r="$requests" 'BEGIN {printf "%.1f", (b - a) * 1e6 / r}') µs"
redis-cli -p "$port" info stats | tr -d '\r' |
  awk -F: -v r="$requests" '/^total_(reads|writes)_processed:/ {printf "%-18s per request %.3f\n", $1, $2 / r}'
redis-cli -p "$port" info commandstats | tr -d '\r' | grep -E '^cmdstat_' | grep -vE 'config|info|ping' |
  awk -F'[:=,]' -v r="$requests" '$3 / r >= 0.001 {printf "%-18s calls/request %.3f  usec/request %.2f  usec/call %s\n", $1, $3 / r, $5 / r, $7}' |
  sort -k3 -rn
if [ -n "${server:-}" ]; then
    dump=$(ls -t "$dir"/cg.out.* | head -1)
    echo "Redis instructions per request: $(( $(sed -n 's/^summary: //p' "$dump") / requests ))"
    if [ -n "${OUT:-}" ]; then cp "$dump" "$OUT"; fi
fi
if [ "${MONITOR:-}" = 1 ]; then
    run -c32 -d3s & loaded=$!
    sleep 1
    timeout 1 redis-cli -p "$port" monitor > "$dir/monitor.txt" || true
    wait "$loaded"
    scripts/script-calls.py "$dir/monitor.txt"
fi
if [ "${SLOWLOG:-}" = 1 ]; then
    run -c32 -d3s & loaded=$!
    sleep 1
    redis-cli -p "$port" config set slowlog-max-len 200000 >/dev/null
    redis-cli -p "$port" slowlog reset >/dev/null
    redis-cli -p "$port" config set slowlog-log-slower-than 0 >/dev/null
    sleep 1
    redis-cli -p "$port" config set slowlog-log-slower-than -1 >/dev/null
    wait "$loaded"
    redis-cli -p "$port" --json slowlog get 200000 > "$dir/slowlog.json"
    scripts/script-calls.py --slowlog "$dir/slowlog.json"
fi
