#!/usr/bin/env bash
# Checks that the library builds as a dependency: with the default features, with none, and with
# each feature alone, without the dev-dependencies (which turn on tokio's `full` and would hide a
# missing feature). `cargo check --lib` builds no dev target, so no dev-dependency's features are
# unified into the library's. Then the `tower-lock` binary with the feature `cli` alone, as
# `cargo install tower-lock --features cli` builds it.
#
#   bash scripts/check-features.sh
#
# Uses its own target directory (target/features), so that its feature sets do not evict the test
# build's artifacts.
set -euo pipefail
cd "$(dirname "$0")/.."

export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-target}/features"
features=$(sed -n '/^\[features\]/,/^\[/p' Cargo.toml | sed -n 's/^\([a-z_-]*\) = \[.*/\1/p' | grep -v '^default$')

check() {
    echo "cargo check --lib $*" >&2
    cargo check --lib --locked --quiet "$@"
}

check
check --no-default-features
for feature in $features; do
    check --no-default-features --features "$feature"
done
echo "cargo check --bin tower-lock --no-default-features --features cli" >&2
cargo check --bin tower-lock --locked --quiet --no-default-features --features cli
