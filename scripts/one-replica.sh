# Sourced by the scripts that measure one replica of the `http_load` example
# (request-instructions.sh, request-syscalls.sh): starts a redis-server of their own on `port`,
# writes the wrk script that draws `accounts` accounts, and kills the replica (`replica`, when
# set) and the server on exit. Sets `bin` and `dir`.
bin=${HTTP_LOAD_BIN:-target/release/examples/http_load}
dir=$(mktemp -d)
replica=
cleanup() {
    [ -z "$replica" ] || kill "$replica" 2>/dev/null || true
    redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
    rm -rf "$dir"
}
trap cleanup EXIT

redis-server --port "$port" --save '' --appendonly no --daemonize yes \
    --logfile "$dir/redis.log" --dir "$dir" >/dev/null
until redis-cli -p "$port" ping >/dev/null 2>&1; do sleep 0.1; done
echo "request = function() return wrk.format('PUT', '/accounts/' .. math.random($accounts)) end" \
    >"$dir/accounts.lua"
