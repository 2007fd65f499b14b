#!/usr/bin/env bash
# Runs the whole test suite (unit, integration against real redis-server processes and PostgreSQL,
# doctests).
#
#   bash scripts/test.sh                 # cargo machete, the dependency build, the docs, then
#                                        # every test of cargo test --all-features --locked
#                                        # (scripts/run-tests.py: three binaries at a time)
#   bash scripts/test.sh CMD [ARGS...]   # CMD instead, with the same Redis and PostgreSQL set up
#
# Unused dependencies: `cargo machete` fails the run on a dependency that no source file names. It is
# installed with `cargo install` when missing (a pinned version; about 3 minutes on 2 cores). The
# library also denies `unused_crate_dependencies`, which catches a dependency named only in comments.
#
# The dependency build: scripts/check-features.sh checks the library alone (default features, none,
# each feature alone) without the dev-dependencies, as a project that depends on it builds it.
#
# The docs: scripts/check-docs.py checks that every relative link and anchor of the Markdown files
# resolves and that README.md (250 lines) and BENCHMARKS.md (400) stay within their lengths; then
# `cargo doc` with -D warnings fails on a broken intra-doc link. The README's code runs as doctests.
#
# Redis: installs redis-server with apt-get when it is missing. Tests start their own servers on
# free loopback ports; nothing depends on a Redis at 6379. The TLS tests (feature `tls`) make their
# certificates with the openssl command, installed with apt-get when it is missing. The command-line
# tool's `watch` test drives it in tmux, installed with apt-get when it is missing.
#
# PostgreSQL: the tests connect to DATABASE_URL (default postgres://postgres@127.0.0.1:5432/postgres).
# When nothing answers there, this script installs postgresql with apt-get if its binaries are
# missing, starts a throwaway cluster of its own on a free loopback port (trust auth), points
# DATABASE_URL at it, and stops and removes it on exit.
set -euo pipefail
cd "$(dirname "$0")/.."

DEFAULT_DATABASE_URL="postgres://postgres@127.0.0.1:5432/postgres"
PG_DIR="" # the throwaway cluster's directory, once this script has made one
PG_BIN="" # the directory of initdb and pg_ctl
APT_UPDATED=""

# Runs a command as root: directly when we are root, else through sudo.
as_root() {
    if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi
}

# Installs Debian packages, updating the package lists once.
apt_install() {
    echo "installing $* with apt-get" >&2
    if [ -z "$APT_UPDATED" ]; then
        as_root apt-get update -qq
        APT_UPDATED=1
    fi
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@"
}

require_cargo() {
    if ! command -v cargo >/dev/null 2>&1; then
        echo "cargo not found: install Rust (https://rustup.rs) first" >&2
        exit 1
    fi
}

MACHETE_VERSION="0.9.2"

require_machete() {
    if ! command -v cargo-machete >/dev/null 2>&1; then
        echo "installing cargo-machete $MACHETE_VERSION with cargo install" >&2
        cargo install --locked --version "$MACHETE_VERSION" cargo-machete
    fi
}

require_redis() {
    if ! command -v redis-server >/dev/null 2>&1; then
        apt_install redis-server
    fi
    redis-server --version
}

# The CLI's `watch` test (tests/cli) runs it in a tmux session and reads its screen back.
require_tmux() {
    if ! command -v tmux >/dev/null 2>&1; then
        apt_install tmux
    fi
}

require_openssl() {
    if ! command -v openssl >/dev/null 2>&1; then
        apt_install openssl
    fi
}

# The newest /usr/lib/postgresql/<ver>/bin (where Debian puts initdb and pg_ctl), or nothing.
debian_pg_bin() {
    local dir
    dir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
    if [ -n "$dir" ] && [ -x "$dir/initdb" ] && [ -x "$dir/pg_ctl" ]; then echo "$dir"; fi
}

require_psql() {
    if ! command -v psql >/dev/null 2>&1; then
        apt_install postgresql-client
    fi
}

# Sets PG_BIN to a directory holding initdb and pg_ctl, installing postgresql when there is none.
require_pg_server_bin() {
    if command -v initdb >/dev/null 2>&1 && command -v pg_ctl >/dev/null 2>&1; then
        PG_BIN=$(dirname "$(command -v initdb)")
        return
    fi
    PG_BIN=$(debian_pg_bin)
    if [ -z "$PG_BIN" ]; then
        apt_install postgresql
        PG_BIN=$(debian_pg_bin)
    fi
    if [ -z "$PG_BIN" ]; then
        echo "postgresql is installed but initdb/pg_ctl are not in /usr/lib/postgresql/*/bin" >&2
        exit 1
    fi
}

# True when a PostgreSQL at the URL accepts our connection and answers a query.
pg_answers() {
    PGCONNECT_TIMEOUT=5 psql "$1" -w -X -A -t -q -c 'select 1' >/dev/null 2>&1
}

# Runs a command as the cluster's owner: the postgres user when we are root (initdb refuses root).
as_pg_owner() {
    if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

# True when something listens on 127.0.0.1:$1.
port_in_use() {
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

stop_own_postgres() {
    if [ -n "$PG_DIR" ]; then
        as_pg_owner "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -m immediate -s stop >/dev/null 2>&1 || true
        rm -rf "$PG_DIR"
        PG_DIR=""
    fi
}

# initdb into a temporary directory, then start the cluster on a free loopback port (retrying on
# another port if the chosen one is taken meanwhile) and export DATABASE_URL.
start_own_postgres() {
    require_pg_server_bin
    if [ "$(id -u)" = 0 ] && ! id postgres >/dev/null 2>&1; then
        echo "running as root but there is no postgres user to own the cluster" >&2
        exit 1
    fi
    PG_DIR=$(mktemp -d "${TMPDIR:-/tmp}/tower-lock-pg.XXXXXX")
    trap stop_own_postgres EXIT
    if [ "$(id -u)" = 0 ]; then chown postgres: "$PG_DIR"; fi
    if ! as_pg_owner "$PG_BIN/initdb" -D "$PG_DIR/data" -U postgres -A trust -E UTF8 --no-sync \
        >"$PG_DIR/initdb.log" 2>&1; then
        cat "$PG_DIR/initdb.log" >&2
        exit 1
    fi
    local attempt port
    for attempt in 1 2 3 4 5; do
        port=$((20000 + RANDOM % 30000))
        if port_in_use "$port"; then continue; fi
        if as_pg_owner "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -l "$PG_DIR/postgres.log" -w -t 60 -s \
            -o "-c listen_addresses=127.0.0.1 -p $port -k $PG_DIR -c fsync=off" start; then
            export DATABASE_URL="postgres://postgres@127.0.0.1:$port/postgres"
            echo "started a throwaway PostgreSQL for the tests at $DATABASE_URL" >&2
            return
        fi
        echo "PostgreSQL did not start on port $port (attempt $attempt):" >&2
        tail -n 5 "$PG_DIR/postgres.log" >&2 || true
    done
    echo "could not start a PostgreSQL" >&2
    exit 1
}

# Uses the PostgreSQL at DATABASE_URL (or the default) when one answers, else starts one.
require_postgres() {
    export DATABASE_URL="${DATABASE_URL:-$DEFAULT_DATABASE_URL}"
    require_psql
    if pg_answers "$DATABASE_URL"; then
        echo "PostgreSQL for the tests: $DATABASE_URL" >&2
        return
    fi
    echo "no PostgreSQL answers at $DATABASE_URL: starting one" >&2
    start_own_postgres
    if ! pg_answers "$DATABASE_URL"; then
        echo "the PostgreSQL started at $DATABASE_URL does not answer" >&2
        exit 1
    fi
}

main() {
    # Signals end the script through `exit`, so the EXIT trap stops our PostgreSQL.
    trap 'exit 130' INT
    trap 'exit 143' TERM
    require_cargo
    require_redis
    require_tmux
    require_openssl
    require_postgres
    if [ "$#" -gt 0 ]; then
        "$@"
    else
        require_machete
        cargo machete
        bash scripts/check-features.sh
        python3 scripts/check-docs.py
        RUSTDOCFLAGS="-D warnings" cargo doc --all-features --no-deps --locked
        python3 scripts/run-tests.py
        bash scripts/schedules.sh
    fi
}

main "$@"
