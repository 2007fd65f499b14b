#!/usr/bin/env bash
# The system calls one replica of the `http_load` example makes per HTTP request, by kind, counted
# by `strace -c` while `wrk -t1 -c32` loads it over K accounts (KEYS_N, 100 by default) for a few
# seconds. strace slows the replica several times over, so only the counts mean anything, not the
# times: they tell how many commands go to Redis per write, and how often threads park (`futex`).
# A polling lock polls more under strace: compare it at K = 10,000, where it seldom waits.
#
#   cargo build --release --example http_load
#   scripts/request-syscalls.sh                              # layer-fair
#   scripts/request-syscalls.sh layer-exclusive rslock
#   HTTP_LOAD_BIN=/tmp/http_load-old scripts/request-syscalls.sh layer-fair   # another build
#   KEYS_N=10000 scripts/request-syscalls.sh layer-fair rslock    # little contention
#
# Needs strace (`apt-get install strace`) and wrk (`apt-get install wrk`).
set -euo pipefail

port=${PORT:-7205}
http_port=${HTTP_PORT:-18091}
secs=${SECS:-4}
accounts=${KEYS_N:-100}
source "$(dirname "$0")/one-replica.sh"
load() { # $1: seconds; prints the requests served
    wrk -t1 -c32 "-d${1}s" -s "$dir/accounts.lua" "http://127.0.0.1:$http_port" |
        awk '/requests in/ {print $1}'
}

variants=("$@")
[ ${#variants[@]} -gt 0 ] || variants=(layer-fair)
for variant in "${variants[@]}"; do
    "$bin" serve "$variant" "$http_port" "redis://127.0.0.1:$port" >/dev/null 2>&1 &
    replica=$!
    until (echo >"/dev/tcp/127.0.0.1/$http_port") 2>/dev/null; do sleep 0.2; done
    load 1 >/dev/null # connections open, caches warm
    # wrk cut the warm-up's last requests off: a lock taken in the handler stays held for its
    # lease (5 s), and the measured requests would poll for it
    sleep 5.5
    strace -c -f -p "$replica" -o "$dir/strace.out" 2>/dev/null &
    tracer=$!
    sleep 0.5
    served=$(load "$secs")
    kill -INT "$tracer"
    wait "$tracer" 2>/dev/null || true
    echo "$variant: system calls per request ($served requests)"
    awk -v n="$served" '$4 ~ /^[0-9]+$/ && $NF != "total" { printf "  %-14s %6.2f\n", $NF, $4 / n }' \
        "$dir/strace.out" | sort -k2 -rn | head -8
    kill "$replica"
    wait "$replica" 2>/dev/null || true
    replica=
done
