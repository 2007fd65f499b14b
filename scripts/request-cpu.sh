#!/usr/bin/env bash
# The CPU time one replica of the `http_load` example and its redis-server spend per HTTP request,
# each split into user space and the kernel (`/proc/<pid>/stat`), while `wrk -t1 -c32` loads the
# replica over K accounts (KEYS_N, 100 by default) for SECS seconds. The kernel's share is the
# network between the processes: system calls, and waking the process at the other end. Times
# move with the VM's hour: compare variants of one invocation, and run it again to see the spread.
#
#   cargo build --release --example http_load
#   scripts/request-cpu.sh layer-fair rslock layer-fair rslock   # alternately
#   KEYS_N=10000 scripts/request-cpu.sh layer-exclusive rslock
#   HTTP_LOAD_BIN=/tmp/http_load-old scripts/request-cpu.sh layer-fair   # another build
#
# Needs wrk (`apt-get install wrk`).
set -euo pipefail

port=${PORT:-7206}
http_port=${HTTP_PORT:-18092}
secs=${SECS:-5}
accounts=${KEYS_N:-100}
source "$(dirname "$0")/one-replica.sh"
server=$(redis-cli -p "$port" info server | tr -d '\r' | sed -n 's/^process_id://p')
ticks() { # user and system clock ticks (1/100 s) of process $1
    awk '{print $14, $15}' "/proc/$1/stat"
}
load() { # $1: seconds; prints the requests served
    wrk -t1 -c32 "-d${1}s" -s "$dir/accounts.lua" "http://127.0.0.1:$http_port" |
        awk '/requests in/ {print $1}'
}

variants=("$@")
[ ${#variants[@]} -gt 0 ] || variants=(layer-fair rslock)
echo "µs of CPU per request, K = $accounts:    replica user / kernel    Redis user / kernel"
for variant in "${variants[@]}"; do
    redis-cli -p "$port" flushall >/dev/null
    "$bin" serve "$variant" "$http_port" "redis://127.0.0.1:$port" >/dev/null 2>&1 &
    replica=$!
    until (echo >"/dev/tcp/127.0.0.1/$http_port") 2>/dev/null; do sleep 0.2; done
    load 1 >/dev/null # connections open, caches warm
    # wrk cut the warm-up's last requests off: a lock taken in the handler stays held for its
    # lease (5 s), and the measured requests would poll for it
    sleep 5.5
    read -r ru rs < <(ticks "$replica")
    read -r su ss < <(ticks "$server")
    served=$(load "$secs")
    read -r ru2 rs2 < <(ticks "$replica")
    read -r su2 ss2 < <(ticks "$server")
    awk -v v="$variant" -v n="$served" -v a=$((ru2 - ru)) -v b=$((rs2 - rs)) \
        -v c=$((su2 - su)) -v d=$((ss2 - ss)) 'BEGIN {
        printf "%-16s %7d requests   %6.1f / %5.1f           %5.1f / %5.1f\n",
            v, n, a * 1e4 / n, b * 1e4 / n, c * 1e4 / n, d * 1e4 / n }'
    kill "$replica"
    wait "$replica" 2>/dev/null || true
    replica=
done
