//! What a run exercised: each kind of step with each kind of answer, and the messages sent, so
//! that a run's summary shows which paths of the scripts it went through.

use std::collections::BTreeMap;
use std::fmt;

use super::ops::Op;
use super::outcome::{Answer, Message, Outcome};

/// Counts of steps by kind and answer, and of messages by kind.
#[derive(Debug, Default)]
pub struct Tally {
    pub steps: usize,
    counts: BTreeMap<String, usize>,
}

/// A step's kind: its name without its arguments.
fn kind(op: &Op) -> String {
    let text = format!("{op:?}");
    let end = text.find([' ', '(']).unwrap_or(text.len());
    match op {
        Op::Restart(loss) => format!("Restart({loss:?})"),
        _ => text[..end].to_owned(),
    }
}

/// An answer's kind: a token, busy, a number...
fn answer(a: &Answer) -> String {
    match a {
        Answer::Token(_) => "token".to_owned(),
        Answer::Int(n) => n.to_string(),
        other => format!("{other:?}").to_lowercase(),
    }
}

impl Tally {
    /// Counts one step and what it did.
    pub fn count(&mut self, op: &Op, outcome: &Outcome) {
        self.count_named(kind(op), outcome);
    }

    /// Counts one step of kind `name` and what it did.
    pub fn count_named(&mut self, name: String, outcome: &Outcome) {
        self.steps += 1;
        let key = match outcome.answer {
            Answer::Nothing => name,
            ref a => format!("{name} {}", answer(a)),
        };
        *self.counts.entry(key).or_default() += 1;
        for (_, message) in &outcome.messages {
            let key = match message {
                Message::Free => "message free",
                Message::Grant(..) => "message grant",
                Message::Other(_) => "message other",
            };
            *self.counts.entry(key.to_owned()).or_default() += 1;
        }
    }
}

impl fmt::Display for Tally {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} steps:", self.steps)?;
        for (key, n) in &self.counts {
            write!(f, "\n  {key}: {n}")?;
        }
        Ok(())
    }
}
