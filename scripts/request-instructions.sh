#!/usr/bin/env bash
# The instructions one replica of the `http_load` example spends per HTTP request, counted by
# valgrind (callgrind): the replica runs under callgrind, once with no load (its setup) and once
# loaded by `wrk -t1 -c4` over 10,000 accounts (KEYS_N and CONNS change both); the difference
# over the requests served is the figure. User space only (system calls and the kernel's side are not counted). The request runs
# through axum and hyper, so the figure compares variants, the layer against a lock in the handler.
#
#   cargo build --release --example http_load
#   scripts/request-instructions.sh                          # layer-fair, layer-exclusive, rslock, setnx
#   HTTP_LOAD_BIN=/tmp/http_load-old scripts/request-instructions.sh layer-fair   # another build
#   OUT=/tmp/fair.cg scripts/request-instructions.sh layer-fair    # keep the loaded run's profile
#   callgrind_annotate --inclusive=yes /tmp/fair.cg                 # where the instructions go
#   KEYS_N=100 CONNS=16 scripts/request-instructions.sh layer-fair rslock   # with contention
#
# Needs valgrind (`apt-get install valgrind`) and wrk (`apt-get install wrk`).
set -euo pipefail

port=${PORT:-7204}
http_port=${HTTP_PORT:-18090}
secs=${SECS:-12}
accounts=${KEYS_N:-10000}
source "$(dirname "$0")/one-replica.sh"

# `measure VARIANT SECONDS`: sets `served` and `instructions` (the replica's)
measure() {
    valgrind --tool=callgrind --callgrind-out-file="$dir/cg.out" \
        "$bin" serve "$1" "$http_port" "redis://127.0.0.1:$port" >/dev/null 2>&1 &
    replica=$!
    until (echo >"/dev/tcp/127.0.0.1/$http_port") 2>/dev/null; do sleep 0.2; done
    served=0
    if [ "$2" -gt 0 ]; then
        served=$(wrk -t1 "-c${CONNS:-4}" "-d${2}s" -s "$dir/accounts.lua" "http://127.0.0.1:$http_port" |
            awk '/requests in/ {print $1}')
    fi
    kill "$replica"
    wait "$replica" 2>/dev/null || true
    replica=
    instructions=$(sed -n 's/^summary: //p;s/^totals: //p' "$dir/cg.out" | head -1)
}

variants=("$@")
[ ${#variants[@]} -gt 0 ] || variants=(layer-fair layer-exclusive rslock setnx)
for variant in "${variants[@]}"; do
    measure "$variant" 0
    setup=$instructions
    measure "$variant" "$secs"
    echo "$variant: $(((instructions - setup) / served)) instructions per request ($served requests)"
    [ -z "${OUT:-}" ] || cp "$dir/cg.out" "$OUT"
done
