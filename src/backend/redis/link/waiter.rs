//! One caller's place in a link's queue: the answers it waits for, and how it gets them.

use std::io;

use redis::{RedisError, RedisResult, Value};
use tokio::sync::oneshot;
use tokio::time::Instant;

use super::Failure;

/// One caller's command (or pipeline): the answers to skip, then those it waits for.
pub(super) struct Waiter {
    pub(super) skip: usize,
    pub(super) count: usize,
    pub(super) values: Vec<Value>,
    pub(super) reply: Reply,
    /// When the reader gives up on the answer (a settled command: a caller that waits keeps a
    /// timer of its own).
    pub(super) deadline: Option<Instant>,
}

pub(super) enum Reply {
    One(oneshot::Sender<RedisResult<Value>>),
    Many(oneshot::Sender<RedisResult<Vec<Value>>>),
    Settle(Settle),
    /// A settled command past its deadline: its settle had the timeout; the answer, should it
    /// still come, is dropped.
    Expired,
}

/// What takes a command's answer in the reader task, for a caller that does not wait for it.
pub(crate) type Settle = Box<dyn FnOnce(RedisResult<Value>) + Send>;

impl Waiter {
    /// Take the next answer: true when it was the last this waiter waits for.
    pub(super) fn take(&mut self, value: Value) -> bool {
        if self.skip > 0 {
            self.skip -= 1;
            return false;
        }
        self.values.push(value);
        self.values.len() == self.count
    }

    /// Hand the caller what it waited for (nothing to do if it stopped waiting).
    pub(super) fn answer(mut self) {
        // a caller that stopped waiting has dropped its end: the answer has nowhere to go
        match self.reply {
            Reply::One(reply) => drop(reply.send(self.values.pop().ok_or_else(no_answer))),
            Reply::Many(reply) => drop(reply.send(Ok(self.values))),
            Reply::Settle(settle) => settle(self.values.pop().ok_or_else(no_answer)),
            Reply::Expired => {}
        }
    }

    pub(super) fn fail(self, failure: &Failure) {
        self.fail_with(&failure.error());
    }

    pub(super) fn fail_with(self, err: &RedisError) {
        match self.reply {
            Reply::One(reply) => drop(reply.send(Err(err.clone()))),
            Reply::Many(reply) => drop(reply.send(Err(err.clone()))),
            Reply::Settle(settle) => settle(Err(err.clone())),
            Reply::Expired => {}
        }
    }

    /// The settle of a command past its deadline at `now`, taken out (the answer, should it
    /// still come, is dropped).
    pub(super) fn expire(&mut self, now: Instant) -> Option<Settle> {
        if self.deadline.is_none_or(|deadline| deadline > now) {
            return None;
        }
        self.deadline = None;
        match std::mem::replace(&mut self.reply, Reply::Expired) {
            Reply::Settle(settle) => Some(settle),
            other => {
                self.reply = other;
                None
            }
        }
    }
}

fn no_answer() -> RedisError {
    io::Error::other("the connection gave no answer").into()
}
