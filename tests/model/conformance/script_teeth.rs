//! The run has teeth the other way too: a seeded change in the text of a real script (not the
//! model's) makes a run disagree within a bounded number of sequences, each in a test of its
//! own. (The shared scripts' are in `shared/teeth.rs`.)

use super::lua::{Lua, Mutation};
use super::real::Real;
use super::run::sequence;
use super::tally::Tally;
use crate::defects::Defects;

/// Sequences tried before a change counts as missed.
const TRIES: u64 = 300;

/// Steps of each sequence.
const STEPS: usize = 60;

/// Runs sequences against the real scripts with `mutation` until one disagrees; panics if none
/// does.
fn disagrees_with(mutation: Mutation) {
    let mut real = Real::start();
    real.lua = Lua::mutated(Some(mutation));
    let mut tally = Tally::default();
    for seed in 0..TRIES {
        let agreed = sequence(&mut real, seed, STEPS, Defects::default(), &mut tally);
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

/// A plain release that does not check the lock's value: a late release of a lost plain hold
/// deletes the plain lock another request took since.
#[test]
fn a_plain_release_without_its_value_check_disagrees() {
    disagrees_with(Mutation {
        file: "plain_release.lua",
        from: "if held ~= ARGV[1] then",
        to: "if type(held) ~= 'string' then",
    });
}
