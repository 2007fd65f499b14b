//! The disagreements the conformance run found, each a fixed sequence that must now agree.

use super::ops::Op;
use super::real::Real;
use super::run::Run;
use super::tally::Tally;
use crate::defects::Defects;
use crate::state::Time;

/// Runs `ops` on both sides from a clean start with this fair eviction (ticks), the model's
/// scripts carrying `defects`; the first disagreement.
pub fn replay(ops: &[Op], eviction: Time, defects: Defects) -> Result<(), String> {
    let mut real = Real::start();
    let mut run = Run::new(&mut real, eviction);
    run.model.defects = defects;
    let mut tally = Tally::default();
    for op in ops {
        run.step(op, &mut tally)?;
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
