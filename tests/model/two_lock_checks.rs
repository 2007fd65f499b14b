//! The safety contract for two locks served by one manager per process: every property of the
//! one-lock model on each lock, and "a message for one lock never acts on the other"; the
//! bounded exhaustive check, random walks beyond it, and the seeded defect only two locks show.

use crate::model::Config;
use crate::properties::{properties, EXCLUSION, EXPIRY, NO_STRANDED, OWN_HOLD, TOKENS};
use crate::state::State;
use crate::two_locks::{view, LockIx, TwoLockModel, TwoState};
use stateright::{Checker, HasDiscoveries, Model, Property, UniformChooser};
use std::time::Instant;

/// A message or an answer of one lock never changes the other's state.
pub const NOT_CROSSED: &str = "a message for one lock never acts on the other";

/// Steps of the exhaustive two-lock check in CI (it grows far faster than one lock's).
pub const TWO_LOCK_DEPTH: usize = 8;

/// Lock `l` as its properties see it: its messages still in the one inbox count as its
/// processes' own (a grant's message not yet read is one the process will use).
fn checked_view(s: &TwoState, l: LockIx) -> State {
    let mut v = view(s, l);
    for (p, two) in v.procs.iter_mut().zip(&s.procs) {
        let own = two.inbox.iter().filter(|(tag, _)| *tag == l);
        p.inbox.extend(own.map(|(_, msg)| msg.clone()));
    }
    v
}

/// Whether the one-lock property `name` holds on both locks of `s`.
fn on_both(m: &TwoLockModel, s: &TwoState, name: &str) -> bool {
    let one = m.one();
    let all = properties(&m.cfg);
    let p = all.iter().find(|p| p.name == name).expect("a property");
    if name == NO_STRANDED {
        (0..2).all(|l| (p.condition)(&one, &checked_view(s, l)))
    } else {
        (0..2).all(|l| (p.condition)(&one, &view(s, l)))
    }
}

/// Every property of the two-lock model.
pub fn two_lock_properties() -> Vec<Property<TwoLockModel>> {
    vec![
        Property::always(EXCLUSION, |m, s| on_both(m, s, EXCLUSION)),
        Property::always(OWN_HOLD, |m, s| on_both(m, s, OWN_HOLD)),
        Property::always(TOKENS, |m, s| on_both(m, s, TOKENS)),
        Property::always(EXPIRY, |m, s| on_both(m, s, EXPIRY)),
        Property::always(NO_STRANDED, |m, s| on_both(m, s, NO_STRANDED)),
        Property::always(NOT_CROSSED, |_, s: &TwoState| !s.crossed),
    ]
}

/// Two processes, each with a request per lock (exclusive or fair; the second lock's fair
/// requests may take it on the plain path too), a lease of two ticks (a hold outlives a
/// restart's tick), a restart.
pub fn two_locks() -> Config {
    let mut cfg = crate::small();
    cfg.leases = vec![2];
    cfg.budget = 1;
    cfg.dead_queue = false;
    cfg.plain = true;
    cfg
}

/// The exhaustive check's depth: `MODEL_DEPTH` if set, else [`TWO_LOCK_DEPTH`].
fn two_lock_depth() -> usize {
    crate::env_number("MODEL_DEPTH").unwrap_or(TWO_LOCK_DEPTH)
}

#[test]
fn two_locks_keep_every_property() {
    crate::check_exhaustively(
        "two locks",
        TwoLockModel { cfg: two_locks() },
        two_lock_depth(),
    );
}

#[test]
fn random_walks_of_two_locks_keep_every_property() {
    let mut cfg = two_locks();
    cfg.leases = vec![1, 2];
    cfg.budget = 2;
    cfg.max_time = 6;
    let walks = crate::env_number("MODEL_WALKS").unwrap_or(crate::walks::WALKS);
    let start = Instant::now();
    let depth = crate::walks::WALK_DEPTH;
    let checker = TwoLockModel { cfg }
        .checker()
        .target_max_depth(depth)
        .target_state_count(walks * depth / 2)
        .threads(1)
        .spawn_simulation(44, UniformChooser)
        .join();
    println!(
        "two-lock walks: {} states, deepest {}, in {:?}",
        checker.state_count(),
        checker.max_depth(),
        start.elapsed()
    );
    for (property, path) in checker.discoveries() {
        crate::trace::report(checker.model(), path, property, "a random walk");
    }
    checker.assert_properties();
}

/// Finds a path that breaks `property` under `cfg`, prints it and returns its length.
fn found(cfg: Config, property: &'static str) -> usize {
    let defects = cfg.defects;
    let checker = TwoLockModel { cfg }
        .checker()
        .target_max_depth(two_lock_depth())
        .finish_when(HasDiscoveries::AnyOf([property].into()))
        .threads(2)
        .spawn_bfs()
        .join();
    let path = checker.discovery(property);
    let path = path.unwrap_or_else(|| panic!("{defects:?} not found by {property}"));
    crate::trace::report(checker.model(), path, property, &defects.switched_on())
}

/// A renewal batch whose answers are applied to the wrong locks: a hold the server lost (a
/// restart back to a snapshot taken before it) is renewed, and one it kept is dropped.
#[test]
fn a_batch_answer_applied_to_the_other_lock_is_found() {
    let mut cfg = two_locks();
    cfg.defects.batch_swapped = true;
    found(cfg, NOT_CROSSED);
}

/// An inbox that routes a grant by its waiter id alone: wait numbers are per lock, so a grant
/// of one lock reaches the other lock's request that waits under the same id.
#[test]
fn a_grant_routed_by_its_waiter_alone_is_found() {
    let mut cfg = two_locks();
    cfg.defects.route_by_waiter = true;
    found(cfg, NOT_CROSSED);
}
