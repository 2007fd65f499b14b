//! The takeover keeps every property: a cut-off holder's `lost()` fires before any probe can end
//! its hold. Each seeded defect of the rule is found, with its trace.

use crate::model::{Config, LockModel};
use crate::properties::EXCLUSION;
use crate::teeth::found_deep;
use crate::trace::replay;
use stateright::Model;

/// Two processes with takeover (a grace of one tick), a lease and a claim of two ticks (longer
/// than the grace, so a takeover can come first), deaths, cut inboxes and a restart.
pub fn takeover_bounds() -> Config {
    let mut cfg = crate::small();
    cfg.takeover = Some(1);
    cfg.leases = vec![2];
    cfg.eviction = 2;
    cfg.dead_queue = false;
    cfg
}

#[test]
fn takeover_keeps_every_property() {
    crate::check_exhaustively(
        "takeover",
        LockModel {
            cfg: takeover_bounds(),
        },
        crate::depth(),
    );
}

/// The teeth's bounds: a grace of two ticks, so that a renewal or a PING can fall inside it (and
/// a lease of three, so that the mark outlives the grace), one request each, no deaths and no
/// restarts, so that the search reaches eleven steps.
fn grace_of_two() -> Config {
    let mut cfg = takeover_bounds();
    cfg.takeover = Some(2);
    cfg.leases = vec![3];
    cfg.budget = 1;
    cfg.deaths = false;
    cfg.restarts = 0;
    cfg
}

#[test]
fn a_takeover_on_one_missed_probe_is_found() {
    let mut cfg = takeover_bounds();
    cfg.defects.takeover_on_one_miss = true;
    found_deep(cfg, EXCLUSION, crate::depth());
}

#[test]
fn counting_a_reconnected_inbox_before_a_renewal_is_found() {
    let mut cfg = grace_of_two();
    cfg.defects.proofs_before_renewal = true;
    found_deep(cfg, EXCLUSION, crate::depth().max(13));
}

#[test]
fn a_renewal_that_keeps_the_mark_is_found() {
    let mut cfg = grace_of_two();
    cfg.defects.renewal_keeps_mark = true;
    found_deep(cfg, EXCLUSION, crate::depth().max(11));
}

/// A fair grant whose manager's inbox was cut before it read the grant's message, marked by a
/// probe, then confirmed by the waiter's call a tick later: that call starts R, but the grant
/// taken up gets a new token, so the earlier mark (of the grant's hold) counts as no mark and
/// the next probe only marks again. Every property holds on the way.
#[test]
fn a_grant_confirmed_after_a_probe_is_not_taken_over_on_the_old_mark() {
    use crate::model::Action::{Acquire, Cut, Probe, Release, Retry, Tick};
    let model = LockModel {
        cfg: takeover_bounds(),
    };
    let steps = [
        Acquire {
            c: 0,
            lease: 2,
            fair: false,
        },
        Acquire {
            c: 1,
            lease: 2,
            fair: true,
        },
        Release(0),
        Cut(1),
        Acquire {
            c: 0,
            lease: 2,
            fair: true,
        },
        Probe(0),
        Tick,
        Retry(1),
        Probe(0),
    ];
    let start = &model.init_states()[0];
    let last = replay(&model, start, &steps).expect("steps the model offers");
    let lock = last
        .server
        .lock
        .as_ref()
        .expect("the confirmed grant's hold");
    let mark = last.server.mark.as_ref().expect("the second probe's mark");
    assert_eq!(
        (lock.holds.keys().next(), mark.since),
        (Some(&1), 1),
        "{last:?}"
    );
    assert_eq!(lock.token, Some(mark.token), "{last:?}");
    let properties = model.properties();
    let broken = properties.iter().filter(|p| !(p.condition)(&model, &last));
    assert_eq!(
        broken.map(|p| p.name).collect::<Vec<_>>(),
        Vec::<&str>::new()
    );
}

/// The walks' three processes with takeover: a grace of two ticks, a claim of three (longer than
/// the grace), on every kind of request the walks make.
#[test]
fn random_walks_with_takeover_keep_every_property() {
    let mut cfg = crate::walks::wide();
    cfg.takeover = Some(2);
    cfg.eviction = 3;
    crate::walks::walk("takeover", LockModel { cfg });
}
