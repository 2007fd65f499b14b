//! Each seeded defect is found: the checker breaks the property it is about, and prints how.

use crate::defects::Defects;
use crate::model::{Action, Config, LockModel, Loss};
use crate::properties::{EXCLUSION, EXPIRY, NO_STRANDED, OWN_HOLD, TOKENS};
use crate::small;
use crate::state::{FairMark, Phase};
use crate::trace::replay;
use stateright::{Checker, HasDiscoveries, Model};

fn found(defects: Defects, property: &'static str) {
    let mut cfg = small();
    cfg.defects = defects;
    found_in(cfg, property);
}

/// Asserts that the checker finds a path that breaks `property` under `cfg`, and prints it.
pub fn found_in(cfg: Config, property: &'static str) {
    found_deep(cfg, property, crate::depth());
}

/// As [`found_in`], searching `depth` steps deep.
pub fn found_deep(cfg: Config, property: &'static str, depth: usize) {
    let defects = cfg.defects;
    let checker = LockModel { cfg }
        .checker()
        .target_max_depth(depth)
        .finish_when(HasDiscoveries::AnyOf([property].into()))
        .threads(2)
        .spawn_bfs()
        .join();
    let path = checker.discovery(property);
    let path = path.unwrap_or_else(|| panic!("{defects:?} not found by {property}"));
    crate::trace::report(checker.model(), path, property, &defects.switched_on());
}

#[test]
fn a_renewal_without_gt_is_found() {
    found(
        Defects {
            renew_without_gt: true,
            ..Defects::default()
        },
        EXCLUSION,
    );
}

#[test]
fn a_release_by_owner_alone_is_found() {
    found(
        Defects {
            release_by_owner: true,
            ..Defects::default()
        },
        OWN_HOLD,
    );
}

#[test]
fn a_token_without_the_clock_floor_is_found() {
    found(
        Defects {
            no_clock_floor: true,
            ..Defects::default()
        },
        TOKENS,
    );
}

#[test]
fn a_reentry_of_a_restored_hold_is_found() {
    found(
        Defects {
            reenter_restored: true,
            ..Defects::default()
        },
        TOKENS,
    );
}

#[test]
fn a_grant_without_its_wait_name_is_found() {
    found(
        Defects {
            grant_unnamed: true,
            ..Defects::default()
        },
        NO_STRANDED,
    );
}

#[test]
fn a_mark_on_a_missing_lock_is_found() {
    found(
        Defects {
            mark_missing: true,
            ..Defects::default()
        },
        EXPIRY,
    );
}

#[test]
fn a_cohort_handoff_of_a_lost_hold_is_found() {
    let mut cfg = small();
    cfg.cohorts = true;
    cfg.defects.handoff_unproven = true;
    found_in(cfg, EXCLUSION);
}

#[test]
fn a_plain_release_that_forgets_its_last_token_is_found() {
    let mut cfg = crate::plain::plain_bounds();
    cfg.defects.plain_release_forgets = true;
    found_in(cfg, TOKENS);
}

/// One process behind a dead one's waits, a restart back to a snapshot and a tick of drift: a
/// wait the process left comes back with its heartbeat and is granted, its message dropped.
fn stranded_grant_bounds() -> Config {
    let mut cfg = small();
    cfg.clients = 1;
    cfg.leases = vec![1];
    cfg.drift = 1;
    cfg.budget = 3;
    cfg.deaths = false;
    cfg
}

/// The steps that leave a grant to a restored wait that no request waits as (a random walk of
/// three processes found them): the process's next wait is granted nothing and gives up.
fn stranded_grant_steps() -> Vec<Action> {
    let fair = Action::Acquire {
        c: 0,
        lease: 1,
        fair: true,
    };
    vec![
        fair.clone(),
        Action::Snapshot,
        Action::Abandon(0),
        Action::Restart(Loss::ToSnapshot),
        fair,
        Action::Retry(0),
        Action::Abandon(0),
        Action::DropMsg(0, 0),
    ]
}

#[test]
fn a_grant_that_outlives_its_claim_is_found() {
    let mut cfg = stranded_grant_bounds();
    cfg.defects.long_claim = true;
    found_deep(cfg, NO_STRANDED, crate::depth().max(10));
}

/// The grant a restored wait leaves behind is allowed for its claim only: the steps above leave
/// one, nothing in the process waits as its wait, and every property holds (the one allowance
/// of "no grant left behind" is used); the whole bounded space keeps every property too.
#[test]
fn a_grant_left_by_a_restored_wait_ends_with_its_claim() {
    let model = LockModel {
        cfg: stranded_grant_bounds(),
    };
    let start = &model.init_states()[1];
    let last = replay(&model, start, &stranded_grant_steps()).expect("steps the model offers");
    let lock = last.server.lock.as_ref().expect("the grant's hold");
    assert_eq!(lock.fair, Some(FairMark::Wait((0, 0))), "{last:?}");
    let p = &last.procs[0];
    let waits_as_it = matches!(p.phase, Phase::Fair { waiter, .. } if waiter == (0, 0));
    assert!(
        !waits_as_it && p.inbox.is_empty() && p.guards.is_empty(),
        "{p:?}"
    );
    let properties = model.properties();
    let broken = properties.iter().filter(|p| !(p.condition)(&model, &last));
    assert_eq!(
        broken.map(|p| p.name).collect::<Vec<_>>(),
        Vec::<&str>::new()
    );
    let checker = model
        .checker()
        .target_max_depth(crate::depth().max(10))
        .threads(2)
        .spawn_bfs()
        .join();
    checker.assert_properties();
}
