//! Liveness (contract 4): a free lock with a live waiter is taken within one round trip of its
//! release, by a wake-up, not by a timer.
//!
//! Stateright checks `eventually` on every path that ends (a state with no step left): such a
//! path is a counterexample when the condition never held along it. It knows no fairness, so
//! the bounds make every path end, and end only when no process has a step left. That is what
//! "fair" means here: no process is starved of a step it could take, since a path cannot stop
//! while one is enabled (weak fairness, by construction). The bounds:
//! - The clock stands still: no lease runs out, no heartbeat or renewal is due (they would be
//!   steps that change nothing, i.e. cycles, which stateright does not check), and no retry on
//!   a timer fires. A waiter moves on only when a wake-up reaches it or an answer told it to
//!   try again at once: a lost wake-up leaves it waiting for ever, where the crate would wait
//!   for a timer, past the one round trip the contract allows.
//! - Nothing fails (no restart, death or dropped message) and waiters are patient (no wait
//!   timeout): contract 4 under faults rests on the reconnection's wake-up of every waiter,
//!   which is not modelled.
//! - Each process makes one request, so every path ends. The condition, "every live process
//!   has taken the lock", is false at the start and needs the waiter to be woken: it is not
//!   met vacuously. It reads a ghost field that only grows, so two paths that meet in one
//!   state agree on it (stateright keeps the first path's record at such a join).

use crate::model::{Config, LockModel};
use crate::state::State;
use stateright::{Checker, Model};
use std::time::Instant;

/// The eventually-property: every live process has taken the lock.
pub const TAKEN: &str = "a free lock with a live waiter is taken";

/// Whether every live process has taken the lock.
pub fn taken(model: &LockModel, s: &State) -> bool {
    let clients = usize::from(model.cfg.clients);
    let procs = s.procs.iter().take(clients).enumerate();
    procs
        .filter(|(_, p)| p.alive)
        .all(|(c, _)| s.ghost.took & (1 << c) != 0)
}

/// The liveness check's bounds: two processes, one request each, in either mode, with a
/// cohort, behind a dead process's waits.
pub fn bounds() -> Config {
    Config {
        clients: 3,
        leases: vec![2],
        eviction: 1,
        max_time: 0,
        restarts: 0,
        budget: 2,
        dead_queue: true,
        deaths: false,
        cohorts: true,
        liveness: true,
        drift: 0,
        unanswered: false,
        take_grants: false,
        plain: false,
        takeover: None,
        defects: Default::default(),
    }
}

#[test]
fn every_waiter_is_woken_to_a_free_lock() {
    let start = Instant::now();
    let checker = LockModel { cfg: bounds() }
        .checker()
        .threads(2)
        .spawn_bfs()
        .join();
    println!(
        "liveness: {} states ({} unique), depth {}, in {:?}",
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

#[test]
fn a_release_that_wakes_nobody_is_found() {
    let mut cfg = bounds();
    cfg.clients = 2;
    cfg.defects.release_silent = true;
    let checker = LockModel { cfg }.checker().threads(2).spawn_bfs().join();
    let path = checker.discovery(TAKEN);
    let path = path.unwrap_or_else(|| panic!("a lost wake-up not found by {TAKEN}"));
    let what = "a release that wakes nobody";
    crate::trace::report(checker.model(), path, TAKEN, what);
}
