//! A fair grant taken from its message under takeover: within its claim, but not once its
//! takeover deadline has passed (`take_grant` in src/manager/acquire.rs): by then the hold it
//! names may have been taken over and the lock granted on under a higher token.

use crate::model::{Action, LockModel};
use crate::properties::TOKENS;
use crate::trace::replay;
use stateright::Model;

/// Grace two ticks, claim three, grants taken from their messages.
fn bounds() -> crate::model::Config {
    let mut cfg = crate::takeover_checks::takeover_bounds();
    (cfg.takeover, cfg.eviction, cfg.leases) = (Some(2), 3, vec![3]);
    cfg.take_grants = true;
    cfg
}

/// Process 1 reads its grant, its inbox is cut, process 0 waits and probes twice a grace apart
/// (the grant's hold is taken over and granted to process 0), then process 1 takes its grant.
fn late_grant() -> Vec<Action> {
    use Action::{Acquire, Cut, Probe, ReadMsg, Release, TakeGrant, Tick};
    let acquire = |c, fair| Acquire { c, lease: 3, fair };
    vec![
        acquire(0, false),
        acquire(1, true),
        Release(0),
        ReadMsg(1, 0),
        Cut(1),
        acquire(0, true),
        Probe(0),
        Tick,
        Tick,
        Probe(0),
        ReadMsg(0, 0),
        TakeGrant(0),
        TakeGrant(1),
    ]
}

/// The properties `cfg` breaks at the end of the late grant.
fn broken(cfg: crate::model::Config) -> Vec<&'static str> {
    let model = LockModel { cfg };
    let start = &model.init_states()[0];
    let last = replay(&model, start, &late_grant()).expect("steps the model offers");
    let properties = model.properties();
    let broken = properties.iter().filter(|p| !(p.condition)(&model, &last));
    broken.map(|p| p.name).collect()
}

#[test]
fn a_grant_past_its_takeover_deadline_is_forgotten() {
    assert_eq!(broken(bounds()), Vec::<&str>::new());
}

#[test]
fn a_grant_taken_past_its_takeover_deadline_is_found() {
    let mut cfg = bounds();
    cfg.defects.grant_past_takeover = true;
    assert_eq!(broken(cfg), vec![TOKENS]);
}
