//! The lock protocol of the Redis backend, model-checked with stateright.
//!
//! Each script of `src/backend/redis/*.lua` is one atomic step on a model server, mirroring its
//! decisions line by line. Two models share the clock, the restarts and the seeded defects:
//!
//! - Exclusive and fair locks (`model.rs`, `clients.rs`, `scripts.rs`, `fair.rs`): acquire.lua,
//!   fair_acquire.lua, release.lua, renew.lua, fair_abandon.lua, abandon.lua, grant_on.lua,
//!   heartbeat.lua and the helpers of common.lua they use. Client processes acquire in either
//!   mode, wait, are woken, re-enter, renew, release, learn they lost the lock and give up
//!   waiting; a second request of a holding process may wait for its hold in memory and take it
//!   by a cohort's hand-off (`cohort.rs`), which needs a recent proof of the hold; a free lock
//!   may be taken on the plain path, `SET NX` and plain_release.lua (`plain.rs`); the server's
//!   clock may drift ahead of the clients' and a renewal may go unanswered (`drift.rs`).
//! - Read/write locks and semaphores (`shared_*.rs`): shared_acquire.lua, shared_release.lua,
//!   shared_abandon.lua, shared.lua's grant, and the shared parts of renew.lua, heartbeat.lua
//!   and grant_on.lua. Requests take reads, writes or permits, wait in the shared queue, are
//!   granted, renew, release and give up; a read joins its process's held read in memory (a
//!   read group), which needs a recent proof of the hold too.
//!
//! The environment advances the server clock, takes a snapshot, restarts the server losing
//! nothing, back to the snapshot or everything, kills a process, and drops or reorders pub/sub
//! messages. The properties are the safety contract of DESIGN.md (`properties.rs`,
//! `shared_checks.rs`) and its liveness (`liveness.rs`); each seeded defect (`defects.rs`) must
//! be found by the checker, with its counterexample printed (`trace.rs`). The exhaustive checks
//! stop at [`DEPTH`] steps (`MODEL_DEPTH=N` for a longer run); random walks go further
//! (`walks.rs`, `MODEL_WALKS=N`). The parallel search may count a few hundred states more or
//! less from one run to the next (a state first met at the depth bound is not expanded).
//!
//! What it abstracts:
//! - One lock, one owner id per process. A process has one request plus its re-entries (exclusive
//!   and fair), or one backend hold of a shared lock and the reads that joined it; each cohort's
//!   or read group's owner id is made for its one hold, so the model's owner and token stand
//!   for it. Shared holds are not re-entered in the backend.
//! - Time is whole ticks; a restart takes one. A hold's `lost()` fires when the clients' clock
//!   reaches its lease's end; the server's clock runs with it, or up to the drift bound ahead
//!   (never behind: that frees nothing early, and a tick is too coarse for 1 %). A grant is
//!   taken up by the waiter's confirming acquire call (which finds its grant), or, under
//!   `take_grants`, from its message as `grants.rs` says.
//! - A proof of a hold (an answer with it, from a call begun under 10 ms before) lasts until the
//!   clock advances or the server restarts: both take far longer than 10 ms.
//! - Tokens: the clock floor is `tick * 1000` µs, so a restart (a tick) passes every block. The
//!   plain path's commands (`SET NX` and the reads after it) are one step: nothing another
//!   client runs between them changes what they read.
//! - A grant's bound (MAX_LOOKED) is 1 waiter (2 for shared locks); a grant is never undone by a
//!   PUBLISH that reached nobody (a manager that listens within a script keeps listening), and
//!   no grant goes to the releasing manager's own waiters.
//! - A process that takes no step while the clock advances is a paused process.
//! - Liveness is checked with the clock standing still and nothing failing (see `liveness.rs`).
//!
//! - A fair waiter may take a grant from its message without a call, while its claim may not
//!   have run out, and forgets a grant older than its last attempt (`grants.rs`, the rules of
//!   `take_grant` and `drop_stale_grant` in src/manager/acquire.rs). Claims and heartbeat
//!   deadlines are asked of the server with the drift allowance, as the backend sends them.
//! - Two locks (`two_locks.rs`, `two_lock_checks.rs`): one manager per process serves both, with
//!   one inbox (messages tagged with their lock), one watchdog batch that renews every hold and
//!   one that heartbeats every wait, and a restart or a death that hits both; the second lock
//!   may also be taken on the plain path, so a plain hold and a hash hold share the batch and
//!   the inbox. Each lock keeps every property, and a message or answer of one lock never acts
//!   on the other.
//! - Dead holders' takeover (`takeover.rs`, `takeover_checks.rs`): an inbox is subscribed or
//!   not (a death, a restart or `CLIENT KILL` unsubscribes it; the process resubscribes and
//!   PINGs); a waiter probes the holder (takeover.lua), a renewal deletes the mark, and the
//!   holder's `lost()` also fires a grace less the drift after `max(R, P)`. Plain holds are
//!   not probed.
//! - The quorum's takeover rule (`quorum_takeover.rs`): each of three masters runs that
//!   protocol on its part of a hold, and the holder is lost once fewer than a majority of its
//!   masters have their deadline ahead; a waiter holds a majority only after that.
//! - A read/write lock beside an exclusive/fair one (`mixed_locks.rs`, `mixed_checks.rs`): the
//!   same sharing across the two families (a fair grant and a shared grant in one inbox, a hash
//!   hold and a shared hold in one renewal batch), each lock checked by its own properties.
//!
//! Not yet modelled (the next steps): Redis Cluster and the quorum backend's scripts, liveness of shared
//! locks and under faults, a semaphore beside another lock (and read groups there beyond the
//! random walks), the cohort's bound on hand-offs and the end of its token block, in-memory
//! re-entries of a cohort, and loom/shuttle checks of the in-process hand-offs
//! (`tests/schedules`).
//!
//! The model is held to the scripts: `conformance.rs` runs random sequences of the exclusive and
//! fair scripts' steps on the model and on a real redis-server running the crate's own scripts,
//! and their answers, messages and states must agree.

mod clients;
mod cohort;
#[cfg(feature = "redis")]
mod conformance;
mod defects;
mod drift;
mod fair;
mod grants;
mod liveness;
mod mixed_checks;
mod mixed_locks;
mod model;
mod plain;
mod properties;
mod quorum_takeover;
mod renewals;
mod scripts;
mod shared_checks;
mod shared_clients;
mod shared_model;
mod shared_scripts;
mod shared_state;
mod state;
mod takeover;
mod takeover_checks;
mod takeover_grants;
mod teeth;
mod trace;
mod two_lock_checks;
mod two_locks;
mod walks;

use model::{Config, LockModel};
use stateright::{Checker, Model};
use std::time::Instant;

/// Steps explored from an initial state by the exhaustive checks (CI's bound).
pub const DEPTH: usize = 8;

/// The exhaustive checks' depth: `MODEL_DEPTH` if set (a longer run), else [`DEPTH`].
pub fn depth() -> usize {
    env_number("MODEL_DEPTH").unwrap_or(DEPTH)
}

/// A whole number from the environment variable `name`, if it is set; a value that is not one
/// stops the test with a clear message rather than running other bounds than asked for.
pub fn env_number(name: &str) -> Option<usize> {
    let value = std::env::var(name).ok()?;
    let number = value
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("{name}={value:?} is not a whole number"));
    Some(number)
}

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
        drift: 0,
        unanswered: false,
        take_grants: false,
        plain: false,
        takeover: None,
        defects: defects::Defects::default(),
    }
}

#[test]
fn the_scripts_keep_every_property() {
    check_exhaustively("exclusive/fair", LockModel { cfg: small() }, depth());
}

/// Explores every state of `model` to `depth` steps, prints the count and time under `name` and
/// any counterexample's trace, and fails if a property broke.
pub fn check_exhaustively<M>(name: &str, model: M, depth: usize)
where
    M: Model + Send + Sync + 'static,
    M::State: std::fmt::Debug + std::hash::Hash + Clone + PartialEq + Send + Sync,
    M::Action: std::fmt::Debug + Clone + PartialEq + Send + Sync,
{
    let start = Instant::now();
    let checker = model
        .checker()
        .target_max_depth(depth)
        .threads(2)
        .spawn_bfs()
        .join();
    println!(
        "{name}: {} states ({} unique), depth {}, in {:?}",
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
