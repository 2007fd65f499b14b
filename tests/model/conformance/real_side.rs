//! The real side of a step: the script call the crate makes for it (its keys and arguments as
//! `mod.rs`, `fair.rs` and `handover.rs` of the Redis backend lay them out on a standalone
//! server), and its answer and messages in the common form.

use redis::Value;

use super::names::{self, ms, LOCK, MS_PER_TICK, PREFIX};
use super::ops::Op;
use super::outcome::{Answer, Message, Outcome};
use super::real::Real;
use crate::state::{Client, Time};

fn flag(b: bool) -> String {
    String::from(if b { "1" } else { "0" })
}

fn lock() -> Vec<String> {
    vec![LOCK.to_owned()]
}

/// Runs one step on the server; `now`: the model's clock after it (for a restart).
pub fn step(real: &mut Real, op: &Op, eviction: Time, now: Time) -> Outcome {
    match *op {
        Op::Tick => real.tick(),
        Op::Snapshot => real.snapshot(now),
        Op::Restart(loss) => real.restart(loss, now),
        Op::Die(c) => real.die(c),
        Op::PlainTake { .. } | Op::PlainRelease { .. } | Op::RenewPlain { .. } => {
            return super::plain::real_step(real, op, eviction);
        }
        Op::Acquire { .. } | Op::FairAcquire { .. } => {
            let answer = acquire(real, op, eviction);
            return Outcome {
                answer,
                messages: inbox(real),
            };
        }
        _ => {
            let value = call(real, op, eviction);
            let releaser = match *op {
                Op::Release { c, .. } => Some(c),
                _ => None,
            };
            return answered(value, releaser, real);
        }
    }
    Outcome::quiet(Answer::Nothing)
}

/// acquire.lua or fair_acquire.lua, as `attempt_in_mode` and `fair_acquire_call` call them.
fn acquire(real: &mut Real, op: &Op, eviction: Time) -> Answer {
    match *op {
        Op::Acquire {
            c,
            lease,
            wait,
            held,
        } => {
            let mode = ["", "w", "wr"][usize::from(wait)].to_owned();
            let mut args = vec![names::owner(c), ms(lease), mode];
            args.extend(held.map(|t| t.1.to_string()));
            match acquired(real.call(|l| &l.acquire, &lock(), &args)) {
                Answer::Int(-1) => Answer::Busy(0),
                other => other,
            }
        }
        Op::FairAcquire {
            c,
            lease,
            will_wait,
            queued,
            n,
            held,
            plain,
        } => {
            let mut args = vec![names::owner(c), ms(lease), flag(will_wait), flag(queued)];
            args.extend([ms(eviction), PREFIX.to_owned(), names::waiter((c, n))]);
            args.extend(held.map(|t| t.1.to_string()));
            args.extend(plain.map(|n| names::plain_value(c, true, n)));
            match acquired(real.call(|l| &l.fair_acquire, &lock(), &args)) {
                Answer::Int(-1) => Answer::Again,
                other => other,
            }
        }
        _ => unreachable!("an acquire"),
    }
}

/// Any other script, as the backend calls it.
fn call(real: &mut Real, op: &Op, eviction: Time) -> Value {
    match *op {
        Op::Release { c, token } => {
            let claim = format!("{} {PREFIX}", u64::from(eviction) * MS_PER_TICK);
            let args = [names::owner(c), claim, token.1.to_string()];
            real.call(|l| &l.release, &lock(), &args)
        }
        Op::Renew { c, lease } => {
            let renewed = real.call(|l| &l.renew, &lock(), &[ms(lease), names::owner(c)]);
            first(renewed)
        }
        Op::Abandon { c, pass_on } => {
            let keys = [LOCK.to_owned(), names::key(":w")];
            let args = [
                names::manager(c),
                flag(true),
                flag(pass_on),
                PREFIX.to_owned(),
            ];
            real.call(|l| &l.abandon, &keys, &args)
        }
        Op::FairAbandon { c, n } => {
            let keys = [
                LOCK.to_owned(),
                names::key(":ql"),
                names::heartbeat((c, n)),
                names::key(":f"),
            ];
            let args = [
                names::owner(c),
                names::waiter((c, n)),
                PREFIX.to_owned(),
                ms(eviction),
            ];
            real.call(|l| &l.fair_abandon, &keys, &args)
        }
        Op::Heartbeat { c, n } => {
            let keys = [LOCK.to_owned(), names::key(":ql"), names::heartbeat((c, n))];
            first(real.call(|l| &l.heartbeat, &keys, &[ms(eviction)]))
        }
        Op::GrantOn { .. } => {
            let keys = [LOCK, ":ql", ":f", ":s", ":qs"].map(|suffix| match suffix {
                LOCK => LOCK.to_owned(),
                _ => names::key(suffix),
            });
            real.call(|l| &l.grant_on, &keys, &[PREFIX.to_owned(), ms(eviction)])
        }
        _ => unreachable!("a script step"),
    }
}

/// The first element of an array answer (a batch of one).
pub fn first(value: Value) -> Value {
    match value {
        Value::Array(mut items) if items.len() == 1 => items.remove(0),
        other => other,
    }
}

fn text(value: &Value) -> Option<String> {
    match value {
        Value::BulkString(bytes) => Some(String::from_utf8_lossy(bytes).into_owned()),
        Value::SimpleString(s) => Some(s.clone()),
        _ => None,
    }
}

/// An acquire script's answer: a token, busy, `'fair'`, or another number or word.
fn acquired(value: Value) -> Answer {
    match value {
        Value::Int(t) if t > 0 => Answer::Token(t as u64),
        Value::Int(-1) => Answer::Int(-1),
        Value::Int(t) if t < -1 => Answer::Busy((-1 - t).unsigned_abs().div_ceil(MS_PER_TICK)),
        other => match text(&other) {
            Some(word) if word == "fair" => Answer::Fair,
            _ => Answer::Other(format!("{other:?}")),
        },
    }
}

/// A script's number or word; a grant returned to the releaser's own manager is its message.
pub fn answered(value: Value, releaser: Option<Client>, real: &mut Real) -> Outcome {
    let mut messages = inbox(real);
    let answer = match value {
        Value::Int(n) => Answer::Int(n),
        other => match text(&other) {
            Some(word) if word == "more" => Answer::More,
            Some(grant) if grant.starts_with("g|") && releaser.is_some() => {
                messages.push((releaser.unwrap_or_default(), message(&grant)));
                Answer::Int(0)
            }
            _ => Answer::Other(format!("{other:?}")),
        },
    };
    Outcome { answer, messages }
}

/// The messages the server published during the step.
pub fn inbox(real: &mut Real) -> Vec<(Client, Message)> {
    real.messages()
        .into_iter()
        .map(|(c, payload)| (c, message(&payload)))
        .collect()
}

/// A message: the lock's name (free), or `g|<lock>|<waiter>|<token>` (a grant).
fn message(payload: &str) -> Message {
    if payload == LOCK {
        return Message::Free;
    }
    let grant = payload
        .strip_prefix("g|")
        .and_then(|rest| rest.strip_prefix(LOCK))
        .and_then(|rest| rest.strip_prefix('|'))
        .and_then(|rest| rest.rsplit_once('|'))
        .and_then(|(waiter, token)| Some(Message::Grant(waiter.to_owned(), token.parse().ok()?)));
    grant.unwrap_or_else(|| Message::Other(payload.to_owned()))
}
