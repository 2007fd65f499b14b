#!/usr/bin/env bash
# Explores the schedules of the crate's in-process hand-offs under shuttle: the cohort hand-off,
# the read groups, the wait registry and the link's answers (the `schedules` unit tests, built only
# under `--cfg tower_lock_shuttle`; see src/schedules.rs). Each check runs under a PCT and a random
# scheduler with fixed seeds, and each seeded defect must be found.
#
#   bash scripts/schedules.sh                              # 1000 schedules per scheduler and check
#   SCHEDULES_ITERATIONS=10000 bash scripts/schedules.sh   # a longer run
#
# `cargo rustc` gives the cfg to this crate alone: the dependencies are those of the ordinary test
# build (`cargo test --all-features`, as scripts/test.sh runs it), not built again. Its test binary
# sits beside the ordinary one (the extra flag changes its name): neither build undoes the other.
set -euo pipefail
cd "$(dirname "$0")/.."

binary=$(cargo rustc --locked --all-features --lib --profile test \
    --message-format json-render-diagnostics \
    -- --cfg tower_lock_shuttle | sed -n 's/.*"executable":"\([^"]*\)".*/\1/p' | tail -n 1)
if [ -z "$binary" ]; then
    echo "schedules.sh: cargo built no test binary" >&2
    exit 1
fi
exec "$binary" schedules "$@"
