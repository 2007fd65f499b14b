#!/usr/bin/env bash
# This process's side of scripts/redis-instructions.sh: the `load` example's instructions per
# acquisition, counted by valgrind (callgrind) while a native redis-server serves it. The count
# covers the managers, redis-rs, tokio and the example's own loop, user space only (system calls
# are not counted); it repeats within ~1 % from run to run.
#
#   cargo build --release --example load
#   scripts/client-instructions.sh spread
#   callgrind_annotate --inclusive=yes "$OUT"      # where they go (OUT=... keeps the profile)
#
# Needs valgrind (`apt-get install valgrind`).
set -euo pipefail

port=${PORT:-7201}
load=${LOAD_BIN:-target/release/examples/load}
out=${OUT:-$(mktemp -u /tmp/client-callgrind.XXXXXX)}
dir=$(mktemp -d)
trap 'redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true; rm -rf "$dir"' EXIT

redis-server --port "$port" --save '' --appendonly no --daemonize yes \
    --logfile "$dir/redis.log" --dir "$dir" >/dev/null
until redis-cli -p "$port" ping >/dev/null 2>&1; do sleep 0.1; done

REDIS_URL="redis://127.0.0.1:$port" LOAD_SECS=${LOAD_SECS:-5} \
    valgrind --tool=callgrind --callgrind-out-file="$out" "$load" -- "$@" 2>/dev/null | tail -n +3
instructions=$(sed -n 's/^summary: //p' "$out")
instructions=${instructions:-$(sed -n 's/^totals: //p' "$out")}
# every acquisition on a single server is two script calls: its acquire and its release
scripts=$(redis-cli -p "$port" info commandstats | tr -d '\r' |
    sed -n 's/^cmdstat_evalsha:calls=\([0-9]*\),.*/\1/p')
acquisitions=$((${scripts:-0} / 2))
echo "client: $instructions instructions, $acquisitions acquisitions" \
    "= $((instructions / acquisitions)) per acquisition (profile: $out)"
