//! Random walks beyond the exhaustive bounds: three processes, more restarts, a longer clock,
//! longer walks, with a fixed seed (one thread, so a run is the same run every time).
//! `MODEL_WALKS=N` runs N walks of each model instead of the CI's few thousand.

use crate::model::{Config, LockModel};
use crate::shared_checks::read_write;
use crate::shared_model::SharedModel;
use stateright::{Checker, Model, UniformChooser};
use std::fmt::Debug;
use std::hash::Hash;
use std::time::Instant;

/// Walks of each model in CI.
pub const WALKS: usize = 5000;

/// Steps of one walk at most.
pub const WALK_DEPTH: usize = 40;

/// The walks' seed.
const SEED: u64 = 44;

/// Exclusive, fair, cohort and plain requests of three processes, with a restart, a tick of
/// drift and unanswered renewals. (Two restarts, the second back to a snapshot older than the
/// first, let a cohort hand off tokens below ones the server issued in between: the proof shows
/// the hold is on the server, not that it stayed there. The contract's restarts are one at a
/// time.)
pub fn wide() -> Config {
    Config {
        clients: 3,
        leases: vec![1, 2, 3],
        eviction: 1,
        max_time: 8,
        restarts: 1,
        budget: 4,
        dead_queue: true,
        deaths: true,
        cohorts: true,
        liveness: false,
        drift: 1,
        unanswered: true,
        take_grants: true,
        plain: true,
        takeover: None,
        defects: Default::default(),
    }
}

pub fn walk<M>(name: &str, model: M)
where
    M: Model + Send + Sync + 'static,
    M::State: Hash + Send + Sync + Clone + PartialEq + Debug + 'static,
    M::Action: Clone + PartialEq + Debug,
{
    let walks = crate::env_number("MODEL_WALKS").unwrap_or(WALKS);
    let start = Instant::now();
    // a walk's states, on average, stand for it in the count the checker stops at
    let checker = model
        .checker()
        .target_max_depth(WALK_DEPTH)
        .target_state_count(walks * WALK_DEPTH / 2)
        .threads(1)
        .spawn_simulation(SEED, UniformChooser)
        .join();
    println!(
        "{name} walks: {} states, deepest {}, in {:?}",
        checker.state_count(),
        checker.max_depth(),
        start.elapsed()
    );
    for (property, path) in checker.discoveries() {
        crate::trace::report(checker.model(), path, property, "a random walk");
    }
    checker.assert_properties();
}

#[test]
fn random_walks_of_three_processes_keep_every_property() {
    walk("exclusive/fair", LockModel { cfg: wide() });
}

#[test]
fn random_walks_of_a_read_write_lock_keep_every_property() {
    let mut cfg = read_write();
    cfg.clients = 3;
    cfg.max_time = 8;
    cfg.restarts = 2;
    cfg.budget = 4;
    cfg.joins = 2;
    walk("read/write", SharedModel { cfg });
}
