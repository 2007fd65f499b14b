//! Each seeded defect is found: the checker breaks the property it is about, and prints how.

use crate::defects::Defects;
use crate::model::{Config, LockModel};
use crate::properties::{EXCLUSION, EXPIRY, NO_STRANDED, OWN_HOLD, TOKENS};
use crate::small;
use stateright::{Checker, HasDiscoveries, Model};

fn found(defects: Defects, property: &'static str) {
    let mut cfg = small();
    cfg.defects = defects;
    found_in(cfg, property);
}

/// Asserts that the checker finds a path that breaks `property` under `cfg`, and prints it.
pub fn found_in(cfg: Config, property: &'static str) {
    let defects = cfg.defects;
    let checker = LockModel { cfg }
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
