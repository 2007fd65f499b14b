#!/usr/bin/env bash
# The client's instructions per uncontended acquire + release (the `cycle` example), counted by
# valgrind (callgrind) while a native redis-server serves it: each cycle is run 1,000 and 3,000
# times, and the difference over 2,000 is its cost without the process's setup. The hand-rolled
# `SET NX` cycle and rslock's run beside ours. User space only; the count repeats within ~1 % from run to run.
#
#   cargo build --release --example cycle
#   scripts/cycle-instructions.sh                      # exclusive, fair, setnx, rslock
#   CYCLE_BIN=/tmp/cycle-old scripts/cycle-instructions.sh exclusive    # another build
#
# Needs valgrind (`apt-get install valgrind`).
set -euo pipefail

port=${PORT:-7202}
cycle=${CYCLE_BIN:-target/release/examples/cycle}
dir=$(mktemp -d)
trap 'redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true; rm -rf "$dir"' EXIT

redis-server --port "$port" --save '' --appendonly no --daemonize yes \
    --logfile "$dir/redis.log" --dir "$dir" >/dev/null
until redis-cli -p "$port" ping >/dev/null 2>&1; do sleep 0.1; done

count() { # instructions of `cycle KIND N`
    REDIS_URL="redis://127.0.0.1:$port" valgrind --tool=callgrind \
        --callgrind-out-file="$dir/cg.out" "$cycle" "$1" "$2" >/dev/null 2>&1
    sed -n 's/^summary: //p;s/^totals: //p' "$dir/cg.out" | head -1
}

kinds=("$@")
[ ${#kinds[@]} -gt 0 ] || kinds=(exclusive fair setnx rslock)
for kind in "${kinds[@]}"; do
    few=$(count "$kind" 1000)
    many=$(count "$kind" 3000)
    echo "$kind: $(((many - few) / 2000)) instructions per acquire + release"
done
