//! The safety contract for shared locks, as properties of the shared model; the exhaustive
//! checks of a read/write lock and of a semaphore; and the seeded defects each one finds.

use crate::shared_model::{SharedConfig, SharedModel};
use crate::shared_state::{Family, Kind, SharedState};
use stateright::{Checker, HasDiscoveries, Model, Property};

/// Contract 1 for a read/write lock: a live write hold overlaps no other live hold.
pub const WRITE_ALONE: &str = "a write excludes every other hold";
/// Contract 1 for a semaphore: no more live holds than permits.
pub const PERMITS: &str = "at most N permits";
/// Contract 3: a token is above every earlier token of a hold it excludes.
pub const SHARED_TOKENS: &str = "tokens increase over excluding holds";
/// Contract 2: a release acts only on the hold it belongs to.
pub const SHARED_OWN_HOLD: &str = "a release touches its own hold only";
/// Contract 5: every key has an expiry.
pub const SHARED_EXPIRY: &str = "no shared key without an expiry";

/// The kinds of the live holds (each process's, once), skipping those a restart took from
/// the server before their `lost()` fired.
fn live_holds(s: &SharedState) -> impl Iterator<Item = Kind> + '_ {
    let procs = s.procs.iter().filter(|p| s.now < p.deadline);
    let holds = procs.filter_map(|p| p.hold.as_ref());
    let live = holds.filter(|h| h.members.iter().any(|m| !m.forgotten));
    live.map(|h| h.kind)
}

fn write_alone(_: &SharedModel, s: &SharedState) -> bool {
    let kinds: Vec<Kind> = live_holds(s).collect();
    kinds.len() <= 1 || !kinds.contains(&Kind::Write)
}

fn permits(m: &SharedModel, s: &SharedState) -> bool {
    match m.cfg.family {
        Family::Semaphore(n) => live_holds(s).count() <= usize::from(n),
        Family::ReadWrite => true,
    }
}

/// Every property of the shared model.
pub fn shared_properties() -> Vec<Property<SharedModel>> {
    vec![
        Property::always(WRITE_ALONE, write_alone),
        Property::always(PERMITS, permits),
        Property::always(SHARED_TOKENS, |_, s: &SharedState| !s.ghost.token_regressed),
        Property::always(SHARED_OWN_HOLD, |_, s: &SharedState| {
            !s.ghost.touched_foreign
        }),
        Property::always(SHARED_EXPIRY, |_, s: &SharedState| {
            !s.server.key_without_expiry()
        }),
    ]
}

/// A read/write lock: two processes, reads (which may join in a group) and writes.
pub fn read_write() -> SharedConfig {
    SharedConfig {
        clients: 2,
        family: Family::ReadWrite,
        kinds: vec![Kind::Read, Kind::Write],
        lease: 2,
        eviction: 1,
        max_time: 2,
        restarts: 1,
        budget: 2,
        joins: 1,
        deaths: true,
        defects: Default::default(),
    }
}

/// A semaphore of two permits, three processes.
pub fn semaphore() -> SharedConfig {
    SharedConfig {
        clients: 3,
        family: Family::Semaphore(2),
        kinds: vec![Kind::Permit],
        lease: 2,
        eviction: 1,
        max_time: 2,
        restarts: 1,
        budget: 1,
        joins: 0,
        deaths: true,
        defects: Default::default(),
    }
}

fn check(name: &str, cfg: SharedConfig) {
    crate::check_exhaustively(name, SharedModel { cfg }, crate::depth());
}

#[test]
fn a_read_write_lock_keeps_every_property() {
    check("read/write", read_write());
}

#[test]
fn a_semaphore_keeps_every_property() {
    check("semaphore", semaphore());
}

fn found(cfg: SharedConfig, property: &'static str) {
    let defects = cfg.defects;
    let checker = SharedModel { cfg }
        .checker()
        .target_max_depth(crate::depth())
        .finish_when(HasDiscoveries::AnyOf([property].into()))
        .threads(2)
        .spawn_bfs()
        .join();
    let path = checker.discovery(property);
    let path = path.unwrap_or_else(|| panic!("{defects:?} not found by {property}"));
    crate::trace::report(checker.model(), path, property, &defects.switched_on());
}

#[test]
fn a_write_granted_beside_reads_is_found() {
    let mut cfg = read_write();
    cfg.defects.write_beside_reads = true;
    found(cfg, WRITE_ALONE);
}

#[test]
fn a_permit_over_the_bound_is_found() {
    let mut cfg = semaphore();
    cfg.defects.permit_over = true;
    found(cfg, PERMITS);
}

#[test]
fn a_read_group_join_on_a_lost_hold_is_found() {
    let mut cfg = read_write();
    cfg.defects.join_unproven = true;
    found(cfg, WRITE_ALONE);
}
