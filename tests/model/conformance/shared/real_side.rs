//! The real side of a shared lock's step: the script call the crate makes for it (its keys and
//! arguments as `shared.rs`, `fair.rs` and `renew.rs` of the Redis backend lay them out on a
//! standalone server), and its answer and messages in the common form.

use redis::Value;

use super::super::names::{self, ms, LOCK, MS_PER_TICK, PREFIX};
use super::super::outcome::{Answer, Message, Outcome};
use super::super::real::Real;
use super::model_side::{family_name, letter, waiter_id};
use super::ops::SharedOp;
use crate::shared_state::{Family, Kind};
use crate::state::{Client, Time};

/// The keys of the lock as a shared lock's scripts name them.
fn keys(suffixes: &[&str]) -> Vec<String> {
    suffixes.iter().map(|s| names::key(s)).collect()
}

/// A wait's heartbeat key.
fn heartbeat(c: Client, n: u8, kind: Kind) -> String {
    names::key(&format!(":hb:{}", waiter_id((c, n), kind)))
}

/// Runs one step on the server; `now`: the model's clock after it (for a restart).
pub fn step(real: &mut Real, op: &SharedOp, family: Family, eviction: Time, now: Time) -> Outcome {
    let claim = ms(eviction);
    let value = match *op {
        SharedOp::Tick | SharedOp::Snapshot | SharedOp::Restart(_) | SharedOp::Die(_) => {
            match *op {
                SharedOp::Tick => real.tick(),
                SharedOp::Snapshot => real.snapshot(now),
                SharedOp::Restart(loss) => real.restart(loss, now),
                SharedOp::Die(c) => real.die(c),
                _ => {}
            }
            return Outcome::quiet(Answer::Nothing);
        }
        SharedOp::Acquire {
            c,
            lease,
            queued,
            n,
            kind,
            held,
        } => {
            let mut k = keys(&["", ":s", ":qs", "", ":f", ":w", ":ql"]);
            k[3] = heartbeat(c, n, kind);
            let args = [
                names::owner(c),
                ms(lease),
                "1".to_owned(),
                String::from(if queued { "1" } else { "0" }),
                claim,
                PREFIX.to_owned(),
                waiter_id((c, n), kind),
                family_name(family),
                letter(kind).to_string(),
                held.map_or(String::new(), |t| t.1.to_string()),
            ];
            let answer = acquired(real.call(|l| &l.shared_acquire, &k, &args));
            return Outcome {
                answer,
                messages: inbox(real),
            };
        }
        SharedOp::Release { c, token } => {
            let args = [
                names::owner(c),
                PREFIX.to_owned(),
                claim,
                token.1.to_string(),
            ];
            real.call(
                |l| &l.shared_release,
                &keys(&["", ":s", ":qs", ":f"]),
                &args,
            )
        }
        SharedOp::Renew { c, lease } => {
            let renewed = real.call(|l| &l.renew, &keys(&[""]), &[ms(lease), names::owner(c)]);
            first(renewed)
        }
        SharedOp::Abandon { c, n, kind } => {
            let mut k = keys(&["", ":s", ":qs", "", ":f"]);
            k[3] = heartbeat(c, n, kind);
            let args = [
                names::owner(c),
                waiter_id((c, n), kind),
                PREFIX.to_owned(),
                claim,
            ];
            real.call(|l| &l.shared_abandon, &k, &args)
        }
        SharedOp::Heartbeat { c, n, kind } => {
            let k = [LOCK.to_owned(), names::key(":qs"), heartbeat(c, n, kind)];
            first(real.call(|l| &l.heartbeat, &k, &[claim]))
        }
        SharedOp::GrantOn { .. } => {
            let k = keys(&["", ":ql", ":f", ":s", ":qs"]);
            real.call(|l| &l.shared_grant_on, &k, &[PREFIX.to_owned(), claim])
        }
    };
    answered(value, op.client(), real)
}

/// The first element of an array answer (a batch of one).
fn first(value: Value) -> Value {
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

/// shared_acquire.lua's answer: a token, busy, try again at once, or a word.
fn acquired(value: Value) -> Answer {
    match value {
        Value::Int(t) if t > 0 => Answer::Token(t as u64),
        Value::Int(-1) => Answer::Again,
        Value::Int(t) if t < -1 => Answer::Busy((-1 - t).unsigned_abs().div_ceil(MS_PER_TICK)),
        other => Answer::Other(text(&other).unwrap_or_else(|| format!("{other:?}"))),
    }
}

/// A script's number or word. A release that granted waiters of its own manager answers their
/// grants (one per line, then perhaps 'more'): each counts as a message to that manager.
fn answered(value: Value, caller: Option<Client>, real: &mut Real) -> Outcome {
    let mut messages = inbox(real);
    let answer = match value {
        Value::Int(n) => Answer::Int(n),
        other => match text(&other) {
            Some(word) if word == "more" => Answer::More,
            Some(lines) if lines.starts_with("g|") => {
                let mut more = false;
                for line in lines.lines() {
                    match line {
                        "more" => more = true,
                        grant => messages.push((caller.unwrap_or_default(), message(grant))),
                    }
                }
                if more {
                    Answer::More
                } else {
                    Answer::Int(0)
                }
            }
            _ => Answer::Other(format!("{other:?}")),
        },
    };
    Outcome { answer, messages }
}

/// The messages the server published during the step, one per grant: a manager gets its
/// grants of one call in one message, a line each.
fn inbox(real: &mut Real) -> Vec<(Client, Message)> {
    let mut messages = Vec::new();
    for (c, payload) in real.messages() {
        messages.extend(payload.lines().map(|line| (c, message(line))));
    }
    messages
}

/// A grant, `g|<lock>|<waiter>|<token>`, or anything else.
fn message(payload: &str) -> Message {
    let grant = payload
        .strip_prefix("g|")
        .and_then(|rest| rest.strip_prefix(LOCK))
        .and_then(|rest| rest.strip_prefix('|'))
        .and_then(|rest| rest.rsplit_once('|'))
        .and_then(|(waiter, token)| Some(Message::Grant(waiter.to_owned(), token.parse().ok()?)));
    grant.unwrap_or_else(|| Message::Other(payload.to_owned()))
}
