#!/usr/bin/env bash
# Redis's CPU instructions per acquisition, counted by valgrind (callgrind): unlike CPU time, the
# count is the same from run to run (within ~0.5 %) whatever else the machine does, so it compares
# two builds of the scripts exactly.
#
#   cargo build --release --example load
#   scripts/redis-instructions.sh spread            # the `load` scenarios whose names have every word
#   LOAD_SECS=10 PORT=7300 scripts/redis-instructions.sh hot fair tasks=64 hold=0ms
#
# It starts redis-server under callgrind on PORT (7200 by default; ~50 times slower than native, so
# far fewer acquisitions run, in larger batches), runs the `load` example against it, and prints
# the instructions redis-server ran during the scenarios divided by their acquisitions (the `load`
# example's acquisitions/s times LOAD_SECS: the count does not depend on which commands the scripts
# run, so it compares any two builds), and script calls per acquisition.
# Needs valgrind (`apt-get install valgrind`).
set -euo pipefail

port=${PORT:-7200}
load=${LOAD_BIN:-target/release/examples/load}
dir=$(mktemp -d)
trap 'redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true; rm -rf "$dir"' EXIT

valgrind --tool=callgrind --callgrind-out-file="$dir/cg.out" \
    redis-server --port "$port" --save '' --appendonly no >"$dir/redis.log" 2>&1 &
server=$!
until redis-cli -p "$port" ping >/dev/null 2>&1; do
    kill -0 "$server" 2>/dev/null || { cat "$dir/redis.log"; exit 1; }
    sleep 0.2
done

# calls of one command, from INFO commandstats
calls() {
    redis-cli -p "$port" info commandstats | tr -d '\r' |
        sed -n "s/^cmdstat_$1:calls=\([0-9]*\),.*/\1/p"
}

redis-cli -p "$port" config resetstat >/dev/null
callgrind_control -z "$server" >/dev/null 2>&1
secs=${LOAD_SECS:-5}
REDIS_URL="redis://127.0.0.1:$port" LOAD_SECS=$secs "$load" -- "$@" | tail -n +3 | tee "$dir/load.out"
callgrind_control -d "$server" >/dev/null 2>&1
sleep 1
dump=$(ls -t "$dir"/cg.out.* | head -1)
instructions=$(sed -n 's/^summary: //p' "$dump")
# acquisitions/s is the column after the scenario's name, whose words contain no digits-only field
acquisitions=$(awk -v secs="$secs" '$1 == "hot" || $1 == "spread" || $1 == "uncontended" { for (i = 2; i <= NF; i++) if ($i ~ /^[0-9]+$/) { n += $i * secs; break } } END { printf "%d", n }' "$dir/load.out")
scripts=$(calls evalsha)
echo "redis-server: $instructions instructions, $acquisitions acquisitions, $scripts script calls"
echo "per acquisition: $((instructions / acquisitions)) instructions," \
    "$(echo "scale=2; $scripts / $acquisitions" | bc) script calls"
