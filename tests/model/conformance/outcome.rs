//! What a step did, in the form both sides map to: the script's answer and the messages it
//! published (or, for a grant to the releaser's own manager, returned in its answer).

use crate::state::Client;

/// A script's answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Answer {
    /// A fencing token (the model's, or the server's until matched).
    Token(u64),
    /// Busy: `-1 - ttl`, with the lock's lease left in whole ticks (rounded up).
    Busy(u64),
    /// fair_acquire.lua's `-1`: try again at once (a grant stopped at its bound).
    Again,
    /// acquire.lua's `'fair'`: the request waits in the fair queue.
    Fair,
    /// A number: holds left (-1: none), renewed or not, a grant dropped or not, a heartbeat's
    /// state, or the 0 of a script that answers nothing else.
    Int(i64),
    /// `'more'`: a grant stopped at its bound with waiters left.
    More,
    /// An environment step: no script ran.
    Nothing,
    /// Anything else the server answered.
    Other(String),
}

/// A message to a manager's inbox.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Message {
    /// The lock may be free.
    Free,
    /// The lock was granted to this waiter under this token.
    Grant(String, u64),
    /// Anything else.
    Other(String),
}

/// A step's answer and messages.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    pub answer: Answer,
    pub messages: Vec<(Client, Message)>,
}

impl Outcome {
    /// The outcome of a step that publishes nothing.
    pub fn quiet(answer: Answer) -> Outcome {
        Outcome {
            answer,
            messages: Vec::new(),
        }
    }

    /// Every token the outcome carries, in order.
    pub fn tokens(&self) -> Vec<u64> {
        let mut tokens = Vec::new();
        if let Answer::Token(t) = self.answer {
            tokens.push(t);
        }
        for (_, message) in &self.messages {
            if let Message::Grant(_, t) = message {
                tokens.push(*t);
            }
        }
        tokens
    }

    /// The outcome with its tokens replaced, in the order [`Outcome::tokens`] gives them.
    pub fn with_tokens(&self, tokens: &[u64]) -> Outcome {
        let mut next = tokens.iter().copied();
        let mut out = self.clone();
        if let Answer::Token(t) = &mut out.answer {
            *t = next.next().unwrap_or(*t);
        }
        for (_, message) in &mut out.messages {
            if let Message::Grant(_, t) = message {
                *t = next.next().unwrap_or(*t);
            }
        }
        out
    }
}
