//! The plain path in the exclusive locks' sequences: a free lock taken without a script (the
//! plain path's commands, and their undo when fair requests queue), released by
//! plain_release.lua, renewed by value by renew.lua, and made a hash by a fair re-entry.
//!
//! The model names a plain hold by its token, the server by the number in the lock's value: the
//! run keeps which token each number stands for (`Run::plain_holds`), and the views compare the
//! lock's holder, mode, hold and expiry.

use redis::Value;

use super::names::{self, ms, LOCK, MS_PER_TICK, PREFIX};
use super::ops::{Op, Party, Rng};
use super::outcome::{Answer, Outcome};
use super::real::Real;
use super::real_side::{answered, first};
use crate::plain::{self, PlainReleased};
use crate::scripts::Ctx;
use crate::state::{Client, Server, Time, TOKEN_BLOCK};

/// The answer of plain commands that found the lock taken (`SET NX` answered nil).
pub const NOT_TAKEN: &str = "not taken";

/// The answer of plain commands that took the lock and gave it back (fair requests queue).
pub const UNDONE: &str = "undone";

/// A plain step of client `c` for `roll`, if one fits `p`: a take of a process that holds and
/// waits for nothing, a release or renewal of its plain hold, a late release of a lost one.
pub fn plain_step(rng: &mut Rng, c: Client, p: &Party, roll: u64) -> Option<Op> {
    let lease = 1 + rng.below(3) as Time;
    match (roll, p.plain) {
        (0..=6, _) if p.guards.is_empty() && p.wait.is_none() && !p.recorded => {
            let fair = rng.chance(50);
            let n = p.next_plain;
            Some(Op::PlainTake { c, lease, fair, n })
        }
        (30..=35, Some((n, fair))) => {
            let token = *p.guards.first()?;
            // the model's clock passes a token a tick later: its release always sends the
            // last token handed out (the server's '' is for a clock that passed it)
            let last = Some(rng.below(TOKEN_BLOCK) as u8);
            Some(Op::PlainRelease {
                c,
                fair,
                n,
                token,
                last,
            })
        }
        (38..=43, _) if !p.dropped_plain.is_empty() => {
            let (n, fair, token) =
                p.dropped_plain[rng.below(p.dropped_plain.len() as u64) as usize];
            Some(Op::PlainRelease {
                c,
                fair,
                n,
                token,
                last: Some(rng.below(TOKEN_BLOCK) as u8),
            })
        }
        (44..=47, Some((n, fair))) => {
            let token = *p.guards.first()?;
            Some(Op::RenewPlain {
                c,
                lease,
                fair,
                n,
                token,
            })
        }
        _ => None,
    }
}

/// A plain step on the model server.
pub fn model_step(s: &mut Server, ctx: &mut Ctx, op: &Op, eviction: Time) -> Answer {
    match *op {
        Op::PlainTake { c, lease, fair, .. } => match plain::plain_take(s, ctx, c, lease, fair) {
            None => Answer::Other(NOT_TAKEN.to_owned()),
            Some((token, false)) => Answer::Token(token),
            Some((token, true)) => {
                let undone = plain::plain_release(s, ctx, (c, fair, token), None, eviction);
                match undone {
                    PlainReleased::Done { more: true } => Answer::More,
                    _ => Answer::Other(UNDONE.to_owned()),
                }
            }
        },
        Op::PlainRelease {
            c,
            fair,
            token,
            last,
            ..
        } => {
            let last = last.map(|k| token.0 + u64::from(k));
            match plain::plain_release(s, ctx, (c, fair, token.0), last, eviction) {
                PlainReleased::Lost => Answer::Int(-1),
                PlainReleased::Hash => Answer::Int(-2),
                PlainReleased::Done { more: true } => Answer::More,
                PlainReleased::Done { more: false } => Answer::Int(0),
            }
        }
        Op::RenewPlain {
            c,
            lease,
            fair,
            token,
            ..
        } => Answer::Int(i64::from(plain::renew_plain(
            s,
            ctx,
            (c, fair, token.0),
            lease,
        ))),
        _ => unreachable!("a plain step"),
    }
}

/// The claim lease and inbox prefix, as plain_release.lua takes them.
fn grant_args(eviction: Time) -> String {
    format!("{} {PREFIX}", u64::from(eviction) * MS_PER_TICK)
}

/// A plain step on the server, as `plain/mod.rs` makes it.
pub fn real_step(real: &mut Real, op: &Op, eviction: Time) -> Outcome {
    let lock = [LOCK.to_owned()];
    match *op {
        Op::PlainTake { c, lease, fair, n } => {
            let value = names::plain_value(c, fair, n);
            let mut pipe = redis::pipe();
            pipe.cmd("SET").arg(LOCK).arg(&value).arg("NX").arg("PX");
            pipe.arg(ms(lease));
            pipe.cmd("GET").arg(names::key(":f"));
            pipe.cmd("TIME");
            pipe.cmd("EXISTS").arg(names::key(":ql"));
            if fair {
                pipe.arg(names::key(":w"));
            }
            let (set, fence, time, queued): (Value, Option<u64>, (u64, u64), u64) =
                real.pipeline(&pipe);
            if set == Value::Nil {
                return Outcome::quiet(Answer::Other(NOT_TAKEN.to_owned()));
            }
            let token = (time.0 * 1_000_000 + time.1).max(fence.unwrap_or(0) + 1);
            if queued == 0 {
                return Outcome::quiet(Answer::Token(token));
            }
            let args = [value, String::new(), grant_args(eviction)];
            let undone = real.call(|l| &l.plain_release, &lock, &args);
            let mut outcome = answered(undone, Some(c), real);
            if outcome.answer == Answer::Int(0) {
                outcome.answer = Answer::Other(UNDONE.to_owned());
            }
            outcome
        }
        Op::PlainRelease {
            c,
            fair,
            n,
            token,
            last,
        } => {
            let last = last.map_or(String::new(), |k| (token.1 + u64::from(k)).to_string());
            let args = [names::plain_value(c, fair, n), last, grant_args(eviction)];
            let released = real.call(|l| &l.plain_release, &lock, &args);
            answered(released, Some(c), real)
        }
        Op::RenewPlain {
            c, lease, fair, n, ..
        } => {
            let owner = format!("={}", names::plain_value(c, fair, n));
            let renewed = first(real.call(|l| &l.renew, &lock, &[ms(lease), owner]));
            answered(renewed, None, real)
        }
        _ => unreachable!("a plain step"),
    }
}

/// Keeps the plain hold of the client of `op` as the step's `answer` says; `token`: the tokens
/// of both sides when the step acquired.
pub fn follow_plain(p: &mut Party, op: &Op, answer: &Answer, token: Option<(u64, u64)>) {
    match *op {
        Op::PlainTake { fair, n, .. } => {
            p.next_plain = n + 1;
            if let Some(token) = token {
                p.guards = vec![token];
                p.plain = Some((n, fair));
            }
        }
        Op::PlainRelease { n, fair, token, .. } if p.plain == Some((n, fair)) => {
            p.plain = None;
            if *answer != Answer::Int(-2) {
                // (-2: a re-entry made it a hash, which release.lua releases by its token)
                p.guards.clear();
                p.dropped_plain.push((n, fair, token));
            }
        }
        Op::PlainRelease { n, fair, token, .. } => {
            p.dropped_plain.retain(|&d| d != (n, fair, token));
        }
        Op::RenewPlain { n, fair, token, .. }
            if *answer == Answer::Int(0) && p.plain == Some((n, fair)) =>
        {
            p.plain = None;
            p.guards.clear();
            p.dropped_plain.push((n, fair, token));
        }
        _ => {}
    }
}
