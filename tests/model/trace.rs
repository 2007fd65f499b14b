//! Counterexamples as the seeded-defect tests print them: the shortest prefix of the path the
//! checker found that already breaks the property (stateright keeps the last violating path it
//! met, often a longer one through the first violation) with every step it does not need taken
//! out, its steps and its last state.

use stateright::{Expectation, Model, Path};
use std::fmt::Debug;

/// Prints the counterexample `path` to `property` of `model` and returns its length in steps:
/// for a safety property, up to the first state that breaks it; for a liveness property, the
/// whole path to the state where it ends.
pub fn report<M>(model: &M, path: Path<M::State, M::Action>, property: &str, what: &str) -> usize
where
    M: Model,
    M::State: Debug + Clone,
    M::Action: Debug + Clone + PartialEq,
{
    let properties = model.properties();
    let found = properties.iter().find(|p| p.name == property);
    let found = found.unwrap_or_else(|| panic!("no property {property}"));
    let always = found.expectation == Expectation::Always;
    let mut steps = Vec::new();
    let mut last = None;
    let mut first = None;
    for (state, action) in path.into_vec() {
        let broken = always && !(found.condition)(model, &state);
        first.get_or_insert_with(|| state.clone());
        last = Some(state);
        match action {
            Some(action) if !broken => steps.push(action),
            _ => break,
        }
    }
    if always {
        let first = first.expect("a path has a state");
        let mut i = steps.len();
        while i > 0 {
            i -= 1;
            // drop a step the break does not need
            let mut fewer = steps.clone();
            fewer.remove(i);
            if let Some(state) = replay(model, &first, &fewer) {
                if !(found.condition)(model, &state) {
                    steps = fewer;
                    last = Some(state);
                }
            }
        }
    }
    println!("{property} broken by {what} in {} steps:", steps.len());
    for step in &steps {
        println!("- {step:?}");
    }
    println!("last state: {last:?}");
    steps.len()
}

/// The state `steps` lead to from `start`, if each is a step the model offers on the way.
pub fn replay<M>(model: &M, start: &M::State, steps: &[M::Action]) -> Option<M::State>
where
    M: Model,
    M::State: Clone,
    M::Action: Clone + PartialEq,
{
    let mut state = start.clone();
    for step in steps {
        let mut offered = Vec::new();
        model.actions(&state, &mut offered);
        if !offered.contains(step) {
            return None;
        }
        state = model.next_state(&state, step.clone())?;
    }
    Some(state)
}
