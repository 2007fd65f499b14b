#!/usr/bin/env bash
# Runs the whole test suite (unit, integration against real redis-server processes, doctests).
# Installs redis-server with apt-get when it is missing. Tests start their own servers on free
# loopback ports; nothing depends on a Redis at 6379.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v redis-server >/dev/null 2>&1; then
    echo "redis-server not found: installing it with apt-get" >&2
    SUDO=""
    if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq redis-server
fi
if ! command -v cargo >/dev/null 2>&1; then
    echo "cargo not found: install Rust (https://rustup.rs) first" >&2
    exit 1
fi

redis-server --version
cargo test --all-features --locked
