#!/usr/bin/env bash
# The instructions per uncontended acquire + release (the `cycle` example), counted by valgrind
# (callgrind): each cycle is run 1,000 and 3,000 times, and the difference over 2,000 is its cost
# without the setup. By default the client's (the `cycle` process, while a native redis-server
# serves it); with SIDE=redis, redis-server's (run under callgrind, the client native). The
# hand-rolled `SET NX` cycle and rslock's run beside ours. User space only; the count repeats
# within ~1 % from run to run.
#
#   cargo build --release --example cycle
#   scripts/cycle-instructions.sh                      # exclusive, fair, setnx, rslock
#   SIDE=redis scripts/cycle-instructions.sh           # the same cycles, Redis's side
#   CYCLE_BIN=/tmp/cycle-old scripts/cycle-instructions.sh exclusive    # another build
#
# Needs valgrind (`apt-get install valgrind`).
set -euo pipefail

port=${PORT:-7202}
cycle=${CYCLE_BIN:-target/release/examples/cycle}
side=${SIDE:-client}
dir=$(mktemp -d)
trap 'redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true; rm -rf "$dir"' EXIT

start_redis() { # $@: how to run it (a prefix, or nothing)
    "$@" redis-server --port "$port" --save '' --appendonly no --dir "$dir" \
        >"$dir/redis.log" 2>&1 &
    until redis-cli -p "$port" ping >/dev/null 2>&1; do sleep 0.1; done
}

stop_redis() {
    redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
    wait
}

total() { sed -n 's/^summary: //p;s/^totals: //p' "$dir/cg.out" | head -1; }

count() { # instructions of `cycle KIND N` on the chosen side
    if [ "$side" = redis ]; then
        start_redis valgrind --tool=callgrind --callgrind-out-file="$dir/cg.out"
        REDIS_URL="redis://127.0.0.1:$port" "$cycle" "$1" "$2" >/dev/null 2>&1
        stop_redis
    else
        REDIS_URL="redis://127.0.0.1:$port" valgrind --tool=callgrind \
            --callgrind-out-file="$dir/cg.out" "$cycle" "$1" "$2" >/dev/null 2>&1
    fi
    total
}

[ "$side" = redis ] || start_redis
kinds=("$@")
[ ${#kinds[@]} -gt 0 ] || kinds=(exclusive fair setnx rslock)
for kind in "${kinds[@]}"; do
    few=$(count "$kind" 1000)
    many=$(count "$kind" 3000)
    echo "$kind: $(((many - few) / 2000)) $side instructions per acquire + release"
done
