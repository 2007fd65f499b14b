//! The run has teeth: the model's scripts with one seeded defect (`defects.rs`) disagree with
//! the real scripts within a bounded number of sequences, each defect in a test of its own.

use super::findings::{replay, LAST};
use super::ops::Op;
use super::real::Real;
use super::run::sequence;
use super::tally::Tally;
use crate::defects::Defects;
use crate::model::Loss;

/// Sequences tried before a defect counts as missed.
const TRIES: u64 = 300;

/// Steps of each sequence.
const STEPS: usize = 60;

/// Runs sequences with `defects` in the model until one disagrees; panics if none does.
fn disagrees(defects: Defects) {
    let mut real = Real::start();
    let mut tally = Tally::default();
    for seed in 0..TRIES {
        if let Err(why) = sequence(&mut real, seed, STEPS, defects, &mut tally) {
            let first = why.lines().next().unwrap_or_default();
            println!(
                "{defects:?}: sequence {seed} disagrees after {} steps: {first}",
                tally.steps
            );
            return;
        }
    }
    panic!("{defects:?}: {TRIES} sequences agreed with the real scripts");
}

#[test]
fn a_renewal_without_gt_disagrees() {
    disagrees(Defects {
        renew_without_gt: true,
        ..Defects::default()
    });
}

#[test]
fn a_release_by_owner_disagrees() {
    disagrees(Defects {
        release_by_owner: true,
        ..Defects::default()
    });
}

#[test]
fn a_token_without_the_clock_floor_disagrees() {
    disagrees(Defects {
        no_clock_floor: true,
        ..Defects::default()
    });
}

/// A hold restored by a restart is one the owner had released: its next request must not
/// re-enter it. (Random runs rarely release between a snapshot and a restart back to it.)
#[test]
fn a_reentry_of_a_restored_hold_disagrees() {
    let defects = Defects {
        reenter_restored: true,
        ..Defects::default()
    };
    assert_eq!(replay(&restored_hold(), 1, Defects::default()), Ok(()));
    let found = replay(&restored_hold(), 1, defects);
    println!("{found:?}");
    assert!(found.is_err_and(|why| why.starts_with("token order differs")));
}

/// A hold taken, kept by a snapshot, released, brought back by a restart to the snapshot, and
/// then a new request of its owner.
fn restored_hold() -> Vec<Op> {
    let lease = 3;
    let acquire = Op::Acquire {
        c: 0,
        lease,
        wait: 0,
        held: None,
    };
    vec![
        acquire.clone(),
        Op::Snapshot,
        Op::Release { c: 0, token: LAST },
        Op::Restart(Loss::ToSnapshot),
        acquire,
    ]
}

#[test]
fn a_grant_without_its_wait_name_disagrees() {
    disagrees(Defects {
        grant_unnamed: true,
        ..Defects::default()
    });
}

/// A waiter that finds the lock free with live waiters ahead (the grant stopped at its bound
/// on a dead one) joins the queue and marks nothing: there is no lock to mark. (Random runs
/// rarely have a dead waiter at the head of a free lock's queue.)
#[test]
fn a_mark_on_a_missing_lock_disagrees() {
    let defects = Defects {
        mark_missing: true,
        ..Defects::default()
    };
    assert_eq!(replay(&dead_head(), 3, Defects::default()), Ok(()));
    let found = replay(&dead_head(), 3, defects);
    println!("{found:?}");
    assert!(found.is_err_and(|why| why.starts_with("states differ")));
}

/// Two waits queued behind a holder, the first one's process dead, the holder's lease run out,
/// and a third wait's first attempt.
fn dead_head() -> Vec<Op> {
    let wait = |c, n| Op::FairAcquire {
        c,
        lease: 1,
        will_wait: true,
        queued: false,
        n,
        held: None,
        plain: None,
    };
    vec![
        wait(2, 0),
        wait(0, 0),
        wait(1, 0),
        Op::Die(0),
        Op::Tick,
        wait(2, 1),
    ]
}

/// A grant made to one wait of an owner, and another request of that owner that has not queued
/// and does not hold it: busy for that request. (The real script re-entered the grant's hold
/// under its token before; random runs rarely ask between a grant and its taking up.)
#[test]
fn a_grant_shared_with_another_request_of_its_owner_disagrees() {
    let defects = Defects {
        share_grant: true,
        ..Defects::default()
    };
    assert_eq!(replay(&owner_grant(), 1, Defects::default()), Ok(()));
    let found = replay(&owner_grant(), 1, defects);
    println!("{found:?}");
    assert!(found.is_err());
}

/// A holder, a wait of another client queued behind it, the holder's release (a grant to that
/// wait), then a new request of the waiting client that does not wait.
fn owner_grant() -> Vec<Op> {
    let fair = |c, n, will_wait| Op::FairAcquire {
        c,
        lease: 3,
        will_wait,
        queued: false,
        n,
        held: None,
        plain: None,
    };
    vec![
        fair(0, 0, true),
        fair(1, 0, true),
        Op::Release { c: 0, token: LAST },
        fair(1, 1, false),
    ]
}
