//! The shared locks' model scripts checked against the real ones: random sequences of reads,
//! writes or permits run on `shared_scripts.rs` and on a real redis-server running
//! shared_acquire.lua, shared_release.lua, shared_abandon.lua, renew.lua, heartbeat.lua (a `:qs`
//! queue) and grant_on.lua must give the same answers, messages and states after every step.
//!
//! Each sequence is of one lock, a read/write lock or a semaphore of two permits, as its seed
//! draws. The method is the exclusive locks' (`../../conformance.rs`); what differs:
//! - Time. A holder's lease end is a score in server ms in the holders' zset (`:s`): a tick
//!   brings those scores 10 s nearer too (`ADVANCE`), and a snapshot restored brings them nearer
//!   by the ticks since it was taken. They are compared as whole ticks left, rounded up.
//! - The grant's bound: the scripts run with `MAX_LOOKED` set to the shared model's (2).
//! - A manager's grants of one call come in one message, a line each: each line is compared as
//!   a message. A release that granted waiters of its own manager answers their grants.
//! - heartbeat.lua's answer is derived from the model's state, as heartbeat.lua reads it.
//! - Not covered: requests that do not wait, families mixed on one lock, and a grant's message
//!   that reaches nobody (the model's managers listen until they die).

mod findings;
mod model_side;
mod ops;
mod real_side;
mod run;
mod teeth;
mod view;

use std::collections::BTreeMap;
use std::time::Instant;

use super::real::Real;
use super::tally::Tally;
use crate::defects::Defects;
use crate::shared_state::Kind;
use crate::state::Waiter;
use run::shared_sequence;

/// The kind of each wait the model's server knows of: the last letter of its id on the server.
#[derive(Debug, Default)]
pub struct SharedNames {
    pub kinds: BTreeMap<Waiter, Kind>,
}

impl SharedNames {
    /// The server's id of wait `w`.
    pub fn waiter(&self, w: Waiter) -> String {
        let kind = self.kinds.get(&w).copied().unwrap_or(Kind::Read);
        model_side::waiter_id(w, kind)
    }
}

#[test]
fn the_model_shared_scripts_answer_as_the_real_ones() {
    let (seed, cases, steps) = super::run_bounds();
    println!("shared conformance: seed {seed}, {cases} sequences of {steps} steps");
    let start = Instant::now();
    let mut real = Real::start();
    let mut tally = Tally::default();
    for case in 0..cases {
        let case_seed = seed.wrapping_add(case);
        let agreed = shared_sequence(&mut real, case_seed, steps, Defects::default(), &mut tally);
        if let Err(why) = agreed {
            panic!(
                "the model and the shared scripts disagree (sequence {case}; replay with \
                 CONFORMANCE_SEED={case_seed} CONFORMANCE_CASES=1): {why}"
            );
        }
    }
    println!("shared conformance: {tally}\nin {:?}", start.elapsed());
}
