//! The disagreements the shared run found, each a fixed sequence that must now agree.

use super::super::real::Real;
use super::super::tally::Tally;
use super::ops::SharedOp;
use super::run::SharedRun;
use crate::shared_state::{Family, Kind};
use crate::state::Time;

/// Runs `ops` on both sides from a clean start of a `family` lock with this eviction (ticks);
/// the first disagreement.
pub fn shared_replay(ops: &[SharedOp], family: Family, eviction: Time) -> Result<(), String> {
    let mut real = Real::start();
    let mut run = SharedRun::new(&mut real, family, eviction);
    let mut tally = Tally::default();
    for op in ops {
        run.step(op, &mut tally)?;
    }
    Ok(())
}

/// A wait that joins the queue keeps the hash alive as long as it waits, and not the holders'
/// zset, whose expiry its holds alone set. (The model kept the zset for the wait too.)
#[test]
fn a_wait_keeps_the_hash_alive_and_not_the_holders() {
    let permit = |c, lease| SharedOp::Acquire {
        c,
        lease,
        queued: false,
        n: 0,
        kind: Kind::Permit,
        held: None,
    };
    let ops = [permit(0, 1), permit(1, 1), permit(2, 3)];
    if let Err(why) = shared_replay(&ops, Family::Semaphore(2), 2) {
        panic!("{why}");
    }
}
