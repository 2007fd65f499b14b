//! The disagreements the conformance run found, each a fixed sequence that must now agree.

use super::ops::{Op, Tokens};
use super::real::Real;
use super::run::Run;
use super::tally::Tally;
use crate::defects::Defects;
use crate::model::Loss;
use crate::state::Time;

/// A release's token in a fixed sequence, which cannot know the server's tokens: the client's
/// last guard's.
pub const LAST: Tokens = (0, 0);

/// Runs `ops` on both sides from a clean start with this fair eviction (ticks), the model's
/// scripts carrying `defects`; the first disagreement.
pub fn replay(ops: &[Op], eviction: Time, defects: Defects) -> Result<(), String> {
    let mut real = Real::start();
    let mut run = Run::new(&mut real, eviction);
    run.model.defects = defects;
    let mut tally = Tally::default();
    for op in ops {
        let op = run.resolve(op);
        run.step(&op, &mut tally)?;
    }
    Ok(())
}

/// Runs `ops` on both sides; panics where they disagree.
fn agree(ops: &[Op]) {
    if let Err(why) = replay(ops, 1, Defects::default()) {
        panic!("{why}");
    }
}

/// The waiting-managers record, emptied, is a key no more: the next wait makes it afresh with
/// its own expiry, shorter than the last one's. (The model kept the old, longer expiry.)
#[test]
fn a_record_of_waiting_managers_made_again_expires_as_made() {
    agree(&[
        Op::Acquire {
            c: 0,
            lease: 1,
            wait: 0,
            held: None,
        },
        Op::Acquire {
            c: 1,
            lease: 3,
            wait: 1,
            held: None,
        },
        Op::Abandon {
            c: 1,
            pass_on: false,
        },
        Op::Acquire {
            c: 1,
            lease: 1,
            wait: 1,
            held: None,
        },
    ]);
}

/// A hold a restart brought back, which its owner had released, ends when its owner takes the
/// lock again; the lock's `#w` mark stays: a manager recorded as waiting must hear of the next
/// release. (The model dropped the mark with the stale hold.)
#[test]
fn a_stale_hold_taken_over_keeps_the_mark_of_the_lock() {
    let acquire = |c, wait| Op::Acquire {
        c,
        lease: 3,
        wait,
        held: None,
    };
    agree(&[
        acquire(0, 0),
        acquire(1, 1),
        Op::Snapshot,
        Op::Release { c: 0, token: LAST },
        Op::Restart(Loss::ToSnapshot),
        acquire(0, 0),
    ]);
}

/// The same for a plain lock: a record of waiting managers made again for a lock taken on the
/// plain path expires as made. (The model kept the old, longer expiry there.)
#[test]
fn a_record_made_again_for_a_plain_lock_expires_as_made() {
    let acquire = |lease| Op::Acquire {
        c: 0,
        lease,
        wait: 1,
        held: None,
    };
    agree(&[
        Op::PlainTake {
            c: 1,
            lease: 3,
            fair: false,
            n: 0,
        },
        acquire(3),
        Op::Abandon {
            c: 0,
            pass_on: false,
        },
        acquire(1),
    ]);
}
