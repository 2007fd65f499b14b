#!/usr/bin/env bash
# Explores the schedules of the crate's in-process hand-offs under shuttle: the cohort hand-off,
# the read groups, the wait registry and the link's answers (the `schedules` unit tests, built only
# under `--cfg tower_lock_shuttle`; see src/schedules.rs). Each check runs under a PCT and a random
# scheduler with fixed seeds, and each seeded defect must be found.
#
#   bash scripts/schedules.sh                          # 1000 schedules per scheduler and check
#   SCHEDULES_ITERATIONS=20000 bash scripts/schedules.sh   # a longer run
#
# The cfg changes the flags of every crate built, so the build goes to a target directory of its
# own (`<target>/schedules`): it does not overwrite the artifacts of the ordinary test build.
set -euo pipefail
cd "$(dirname "$0")/.."

target="${CARGO_TARGET_DIR:-target}"
export CARGO_TARGET_DIR="$target/schedules"
export RUSTFLAGS="${RUSTFLAGS:-} --cfg tower_lock_shuttle"
exec cargo test --locked --lib -- schedules "$@"
