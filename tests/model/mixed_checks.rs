//! The safety contract for a read/write lock beside an exclusive/fair one, served by one
//! manager per process: every property of each lock's own model on that lock, and "a message
//! for one lock never acts on the other"; the bounded exhaustive check, random walks beyond it,
//! and the seeded defects only two locks show, found here across the two families.

use crate::defects::Defects;
use crate::mixed_locks::{MixedModel, MixedState, Tagged};
use crate::model::Config;
use crate::properties::{properties, NO_STRANDED};
use crate::shared_checks::{read_write, shared_properties};
use crate::shared_model::SharedConfig;
use crate::state::State;
use crate::two_lock_checks::NOT_CROSSED;
use stateright::{Checker, HasDiscoveries, Model, Property, UniformChooser};
use std::time::Instant;

/// The exclusive/fair lock as its model sees it: its messages still in the one inbox count as
/// its processes' own (a grant's message not yet read is one the process will use).
fn exclusive_view(s: &MixedState) -> State {
    let mut v = s.exclusive.clone();
    for (p, inbox) in v.procs.iter_mut().zip(&s.inboxes) {
        p.inbox.extend(inbox.iter().filter_map(|m| match m {
            Tagged::Exclusive(msg) => Some(msg.clone()),
            Tagged::Shared(..) => None,
        }));
    }
    v
}

/// Whether the exclusive/fair lock's property `name` holds in `s`.
fn on_exclusive(m: &MixedModel, s: &MixedState, name: &str) -> bool {
    let all = properties(&m.exclusive.cfg);
    let p = all.iter().find(|p| p.name == name).expect("a property");
    if name == NO_STRANDED {
        (p.condition)(&m.exclusive, &exclusive_view(s))
    } else {
        (p.condition)(&m.exclusive, &s.exclusive)
    }
}

/// Whether the read/write lock's property `name` holds in `s`.
fn on_shared(m: &MixedModel, s: &MixedState, name: &str) -> bool {
    let all = shared_properties();
    let p = all.iter().find(|p| p.name == name).expect("a property");
    (p.condition)(&m.shared, &s.shared)
}

/// Every property of the mixed model. (A property's condition is a plain function: each one
/// looks its lock's property up by name.)
pub fn mixed_properties() -> Vec<Property<MixedModel>> {
    use crate::properties::{EXCLUSION, EXPIRY, OWN_HOLD, TOKENS};
    use crate::shared_checks::{SHARED_EXPIRY, SHARED_OWN_HOLD, SHARED_TOKENS, WRITE_ALONE};
    vec![
        Property::always(EXCLUSION, |m, s| on_exclusive(m, s, EXCLUSION)),
        Property::always(OWN_HOLD, |m, s| on_exclusive(m, s, OWN_HOLD)),
        Property::always(TOKENS, |m, s| on_exclusive(m, s, TOKENS)),
        Property::always(EXPIRY, |m, s| on_exclusive(m, s, EXPIRY)),
        Property::always(NO_STRANDED, |m, s| on_exclusive(m, s, NO_STRANDED)),
        Property::always(WRITE_ALONE, |m, s| on_shared(m, s, WRITE_ALONE)),
        Property::always(SHARED_TOKENS, |m, s| on_shared(m, s, SHARED_TOKENS)),
        Property::always(SHARED_OWN_HOLD, |m, s| on_shared(m, s, SHARED_OWN_HOLD)),
        Property::always(SHARED_EXPIRY, |m, s| on_shared(m, s, SHARED_EXPIRY)),
        Property::always(NOT_CROSSED, |_, s: &MixedState| !s.crossed),
    ]
}

/// Two processes, each with one request per lock: exclusive or fair on one, a read or a write
/// on the other; leases of two ticks (a hold outlives a restart's tick), a restart, a death.
pub fn mixed() -> (Config, SharedConfig) {
    let mut cfg = crate::small();
    cfg.leases = vec![2];
    cfg.budget = 1;
    cfg.dead_queue = false;
    let mut shared = read_write();
    shared.budget = 1;
    shared.joins = 0;
    (cfg, shared)
}

fn mixed_model(defects: Defects) -> MixedModel {
    let (mut cfg, shared) = mixed();
    cfg.defects = defects;
    MixedModel::new(cfg, shared)
}

#[test]
fn a_read_write_lock_beside_a_fair_one_keeps_every_property() {
    crate::check_exhaustively(
        "read/write beside exclusive/fair",
        mixed_model(Default::default()),
        crate::depth(),
    );
}

#[test]
fn random_walks_of_a_read_write_lock_beside_a_fair_one_keep_every_property() {
    let (mut cfg, mut shared) = mixed();
    cfg.budget = 2;
    cfg.max_time = 6;
    (shared.budget, shared.joins) = (3, 1);
    let walks = crate::env_number("MODEL_WALKS").unwrap_or(crate::walks::WALKS);
    let depth = crate::walks::WALK_DEPTH;
    let start = Instant::now();
    let checker = MixedModel::new(cfg, shared)
        .checker()
        .target_max_depth(depth)
        .target_state_count(walks * depth / 2)
        .threads(1)
        .spawn_simulation(44, UniformChooser)
        .join();
    println!(
        "read/write beside exclusive/fair walks: {} states, deepest {}, in {:?}",
        checker.state_count(),
        checker.max_depth(),
        start.elapsed()
    );
    for (property, path) in checker.discoveries() {
        crate::trace::report(checker.model(), path, property, "a random walk");
    }
    checker.assert_properties();
}

/// Finds a path that breaks "a message for one lock never acts on the other" under `defects`
/// and prints it.
fn crossed_found(defects: Defects) {
    let checker = mixed_model(defects)
        .checker()
        .target_max_depth(crate::depth())
        .finish_when(HasDiscoveries::AnyOf([NOT_CROSSED].into()))
        .threads(2)
        .spawn_bfs()
        .join();
    let path = checker.discovery(NOT_CROSSED);
    let path = path.unwrap_or_else(|| panic!("{defects:?} not found by {NOT_CROSSED}"));
    crate::trace::report(checker.model(), path, NOT_CROSSED, &defects.switched_on());
}

/// A renewal batch whose answers are applied to the wrong locks: a shared hold's answer lands
/// on the exclusive hold, and the other way round.
#[test]
fn a_batch_answer_applied_to_the_other_family_is_found() {
    crossed_found(Defects {
        batch_swapped: true,
        ..Defects::default()
    });
}

/// An inbox that routes a grant by its waiter id alone: a fair grant reaches the read/write
/// lock's request that waits under the same id, or a shared grant the fair one.
#[test]
fn a_grant_routed_to_the_other_family_is_found() {
    crossed_found(Defects {
        route_by_waiter: true,
        ..Defects::default()
    });
}
