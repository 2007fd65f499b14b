//! The model's scripts checked against the real ones: random sequences of the model's
//! operations run on `scripts.rs`/`fair.rs`/`plain.rs` and on a real redis-server running the
//! crate's Lua scripts must give the same answers, messages and states after every step.
//!
//! The model is only worth what it says about the code: a script changed without the model
//! following would leave the model checking a protocol nobody runs. Here every script the model
//! mirrors (acquire, fair_acquire, release, renew, abandon, fair_abandon, heartbeat, grant_on)
//! runs as the crate assembles it (`lua.rs` includes the crate's own `scripts.rs` and the same
//! `.lua` files), with the keys and arguments the Redis backend passes. A change to a script that
//! changes what it answers, publishes or leaves in Redis — a field, a mark, an expiry, an order —
//! makes a sequence disagree, and the test prints the seed and the steps until `scripts.rs` (or
//! `fair.rs`) makes the same change. (Taking `GT` out of renew.lua's `PEXPIRE` fails it within a
//! few hundred steps: a renewal with a shorter lease then cuts the lock's expiry.)
//! `model_defects.rs` turns it around: each seeded defect of the model's scripts makes a run
//! disagree. `findings.rs` keeps each disagreement found as a fixed sequence.
//!
//! `CONFORMANCE_CASES` (sequences), `CONFORMANCE_STEPS` (steps each) and `CONFORMANCE_SEED` (the
//! first sequence's seed; each next one adds 1) set a run; the seed is printed.
//!
//! Implementation notes:
//! - Time. A tick is 10 s (the scripts keep the waiting-managers record 10 000 ms past the lock
//!   and the lease; the model one tick). The server's clock does not advance: a tick brings every
//!   key's expiry 10 s nearer and drops the keys it reaches (`lua.rs`, `ADVANCE`), and expiries
//!   are compared in whole ticks left, rounded up. A sequence takes far less than a tick.
//! - Tokens. The model's clock floor is `tick * 1000`, the server's its real clock: tokens are
//!   compared by order (`tokens.rs`), not by value. The fencing counter `:f` is not compared (its
//!   presence depends on the time scale: `view.rs`). At most 12 fresh tokens are taken per tick.
//! - The grant's bound: the scripts run with `MAX_LOOKED` set to the model's (1).
//! - Restarts: losing nothing is `DEBUG RELOAD` (an RDB saved and loaded), everything is
//!   `FLUSHALL`, back to a snapshot is every key `DUMP`ed at the snapshot and `RESTORE`d with
//!   its expiry less the ticks since. Pub/sub connections stay (the model's managers listen again
//!   at once).
//! - Messages are read from each live manager's subscribed inbox connection and compared per
//!   manager (the order between two managers' messages is not observable); a grant a release
//!   returns to its own manager counts as a message to it. A dead process's manager
//!   unsubscribes.
//! - heartbeat.lua's answer (0 gone, 1 queued behind a holder, 2 queued with the lock free) has
//!   no counterpart in `fair.rs`: it is derived from the model's state.
//! - The plain path (`plain.rs`) runs in the same sequences: its commands and their undo,
//!   plain_release.lua and renewals by value; a plain hold is compared by the model token its
//!   number stands for. Its releases always send the last token handed out: the model's clock
//!   passes a token only a tick later.
//! - `script_teeth.rs` and `shared/teeth.rs` seed a change in a real script's text: the run must
//!   disagree.
//! - Not covered: the `'wo'` wait modes, a cluster's key layout, renewals and heartbeats of many
//!   locks per call. Shared locks run in `shared/` by the same method.

#[path = "../support/mod.rs"]
mod support;

mod findings;
mod lua;
mod model_defects;
mod model_side;
mod names;
mod ops;
mod outcome;
mod plain;
mod real;
mod real_side;
mod run;
mod script_teeth;
mod shared;
mod tally;
mod tokens;
mod view;

use std::time::{Instant, SystemTime, UNIX_EPOCH};

use crate::defects::Defects;
use real::Real;
use run::sequence;
use tally::Tally;

/// Sequences of a default run.
const CASES: u64 = 200;

/// Steps of each sequence of a default run.
const STEPS: usize = 60;

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    match std::env::var(name) {
        Ok(text) => text
            .parse()
            .unwrap_or_else(|_| panic!("{name}={text} is not a number")),
        Err(_) => default,
    }
}

/// A run's first seed, sequences and steps: the environment's, else the clock's and the
/// defaults.
fn run_bounds() -> (u64, u64, usize) {
    let clock = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let seed = env_or("CONFORMANCE_SEED", clock.as_nanos() as u64);
    let cases = env_or("CONFORMANCE_CASES", CASES);
    let steps = env_or("CONFORMANCE_STEPS", STEPS);
    (seed, cases, steps)
}

#[test]
fn the_model_scripts_answer_as_the_real_ones() {
    let (seed, cases, steps) = run_bounds();
    println!("conformance: seed {seed}, {cases} sequences of {steps} steps");
    let start = Instant::now();
    let mut real = Real::start();
    let mut tally = Tally::default();
    for case in 0..cases {
        let case_seed = seed.wrapping_add(case);
        if let Err(why) = sequence(&mut real, case_seed, steps, Defects::default(), &mut tally) {
            panic!(
                "the model and the scripts disagree (sequence {case}; replay with \
                 CONFORMANCE_SEED={case_seed} CONFORMANCE_CASES=1): {why}"
            );
        }
    }
    println!("conformance: {tally}\nin {:?}", start.elapsed());
}
