//! The lock protocol of the Redis backend, model-checked with stateright.
//!
//! Each script of `src/backend/redis/*.lua` is one atomic step on a model server (`scripts.rs`
//! mirrors acquire.lua, fair_acquire.lua, release.lua, renew.lua, fair_abandon.lua,
//! abandon.lua, grant_on.lua, heartbeat.lua and the helpers of common.lua they use). Client
//! processes (`clients.rs`) acquire in exclusive or fair mode, wait, are woken, re-enter,
//! renew, release, learn they lost the lock, and give up waiting; the environment (`model.rs`)
//! advances the server clock, takes a snapshot, restarts the server losing nothing, back to the
//! snapshot or everything, kills a process, and drops or reorders pub/sub messages. The
//! properties (`properties.rs`) are the safety contract of DESIGN.md; each seeded defect
//! (`defects.rs`) must be found by the checker, with its counterexample printed.
//! `conformance.rs` runs random sequences of the scripts' steps on the model and on a real
//! redis-server running the crate's scripts: answers, messages and states must agree.
//!
//! What it abstracts:
//! - One lock, one owner id per process, one request per process plus its re-entries.
//! - Time is whole ticks; a restart takes one. The client's clock is the server's: a hold's
//!   `lost()` fires at the tick its lease ends on the server. A grant is taken up by the
//!   waiter's confirming `fair_acquire` (which finds its grant), not from the message alone.
//! - Tokens: the clock floor is `tick * 1000` µs, so a restart (a tick) passes every block.
//! - A grant's bound (MAX_LOOKED) is 1 waiter; a grant is never undone by a PUBLISH that
//!   reached nobody (a manager that listens within a script keeps listening).
//! - A process that takes no step while the clock advances is a paused process.
//!
//! Not yet modelled (the next steps): cohorts (in-memory hand-off and its 10 ms proof window),
//! read/write locks, read groups and semaphores (shared_*.lua), the plain path (SET NX and
//! plain_release.lua), Redis Cluster and the quorum backend, clock drift between client and
//! server, two locks, the watchdog's unanswered renewals, liveness under fair scheduling
//! (`eventually`), and loom/shuttle checks of the in-process hand-offs.

mod clients;
mod cohort;
#[cfg(feature = "redis")]
mod conformance;
mod defects;
mod fair;
mod liveness;
mod model;
mod properties;
mod scripts;
mod state;
mod teeth;

use model::{Config, LockModel};
use stateright::{Checker, Model};
use std::time::Instant;

/// Steps explored from an initial state.
pub const DEPTH: usize = 8;

/// The bounds of the exhaustive check: two processes, leases of one and two ticks.
pub fn small() -> Config {
    Config {
        clients: 2,
        leases: vec![1, 2],
        eviction: 1,
        max_time: 2,
        restarts: 1,
        budget: 2,
        dead_queue: true,
        deaths: true,
        cohorts: false,
        liveness: false,
        defects: defects::Defects::default(),
    }
}

#[test]
fn the_scripts_keep_every_property() {
    let start = Instant::now();
    let checker = LockModel { cfg: small() }
        .checker()
        .target_max_depth(DEPTH)
        .threads(2)
        .spawn_bfs()
        .join();
    println!(
        "{} states ({} unique), depth {}, in {:?}",
        checker.state_count(),
        checker.unique_state_count(),
        checker.max_depth(),
        start.elapsed()
    );
    for (name, path) in checker.discoveries() {
        println!("{name}: {path}");
    }
    checker.assert_properties();
}
