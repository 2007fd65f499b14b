//! The shared run has teeth: a seeded change in the text of a real shared script makes a run
//! disagree with the model within a bounded number of sequences.

use super::super::lua::{Lua, Mutation};
use super::super::real::Real;
use super::super::tally::Tally;
use super::run::shared_sequence;
use crate::defects::Defects;

/// Sequences tried before a change counts as missed.
const TRIES: u64 = 300;

/// Steps of each sequence.
const STEPS: usize = 60;

/// Runs sequences against the real scripts with `mutation` until one disagrees; panics if none
/// does.
pub fn shared_disagrees(mutation: Mutation) {
    let mut real = Real::start();
    real.lua = Lua::mutated(Some(mutation));
    let mut tally = Tally::default();
    for seed in 0..TRIES {
        let agreed = shared_sequence(&mut real, seed, STEPS, Defects::default(), &mut tally);
        if let Err(why) = agreed {
            let first = why.lines().next().unwrap_or_default();
            println!(
                "{mutation:?}: sequence {seed} disagrees after {} steps: {first}",
                tally.steps
            );
            return;
        }
    }
    panic!("{mutation:?}: {TRIES} sequences agreed with the model");
}

/// A release that frees its room and grants it to nobody: the waiters behind it (the next
/// kind, a write after reads or reads after a write) wait on.
#[test]
fn a_shared_release_that_grants_nobody_disagrees() {
    shared_disagrees(Mutation {
        file: "shared_release.lua",
        from: "local _, grants, more = grant_shared(lock, holders, q, fence, state[3], ARGV[2], \
               ARGV[3], nil, owner)",
        to: "local grants, more = nil, false",
    });
}
