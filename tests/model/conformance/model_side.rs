//! The model side: the functions of `scripts.rs` and `fair.rs` on a model server, one per step.

use super::names;
use super::ops::Op;
use super::outcome::{Answer, Message, Outcome};
use crate::defects::Defects;
use crate::fair;
use crate::model::Loss;
use crate::scripts::{self, Acquired, Ctx};
use crate::state::{Client, FairMark, Msg, Server, Time};

/// The model server, its clock and snapshot, and which managers listen.
pub struct ModelSide {
    pub server: Server,
    pub now: Time,
    pub snapshot: Option<Server>,
    pub alive: Vec<bool>,
    /// The fair eviction (heartbeat deadline and claim lease), in ticks.
    pub eviction: Time,
    /// The seeded defects the model's scripts carry (none: the scripts as they are).
    pub defects: Defects,
}

impl ModelSide {
    /// A clean server with `clients` live managers.
    pub fn new(clients: u8, eviction: Time) -> ModelSide {
        ModelSide {
            server: Server::default(),
            now: 0,
            snapshot: None,
            alive: vec![true; usize::from(clients)],
            eviction,
            defects: Defects::default(),
        }
    }

    /// Runs one step.
    pub fn step(&mut self, op: &Op) -> Outcome {
        if matches!(op, Op::Tick | Op::Snapshot | Op::Restart(_) | Op::Die(_)) {
            self.environment(op);
            return Outcome::quiet(Answer::Nothing);
        }
        let mut ctx = Ctx {
            now: self.now,
            defects: self.defects,
            alive: &self.alive,
            out: Vec::new(),
        };
        let answer = match op {
            Op::Acquire { .. } | Op::FairAcquire { .. } => {
                match acquire(&mut self.server, &mut ctx, op, self.eviction) {
                    // the script answers the lease the lock has left after it
                    Answer::Busy(_) => Answer::Busy(lease_left(&self.server, self.now)),
                    other => other,
                }
            }
            Op::PlainTake { .. } | Op::PlainRelease { .. } | Op::RenewPlain { .. } => {
                super::plain::model_step(&mut self.server, &mut ctx, op, self.eviction)
            }
            _ => call(&mut self.server, &mut ctx, op, self.eviction),
        };
        Outcome {
            answer,
            messages: ctx.out.into_iter().map(message).collect(),
        }
    }

    fn environment(&mut self, op: &Op) {
        match *op {
            Op::Tick => self.now += 1,
            Op::Snapshot => self.snapshot = Some(self.server.clone()),
            Op::Restart(loss) => {
                self.now += 1;
                match loss {
                    Loss::Nothing => {}
                    Loss::ToSnapshot => self.server = self.snapshot.clone().unwrap_or_default(),
                    Loss::Everything => self.server = Server::default(),
                }
            }
            Op::Die(c) => self.alive[usize::from(c)] = false,
            _ => unreachable!("a script step"),
        }
        self.server.expire(self.now);
    }
}

/// acquire.lua or fair_acquire.lua.
fn acquire(s: &mut Server, ctx: &mut Ctx, op: &Op, eviction: Time) -> Answer {
    match *op {
        Op::Acquire {
            c,
            lease,
            wait,
            held,
        } => acquired(scripts::acquire(s, ctx, c, lease, wait, held.map(|t| t.0))),
        Op::FairAcquire {
            c,
            lease,
            will_wait,
            queued,
            n,
            held,
            plain,
        } => {
            let held = held.map(|t| t.0);
            let waiter = (c, n);
            let got = fair::fair_acquire(
                s,
                ctx,
                c,
                lease,
                will_wait,
                queued,
                eviction,
                waiter,
                (held, plain.is_some()),
            );
            match got {
                Acquired::Fair => Answer::Again,
                other => acquired(other),
            }
        }
        _ => unreachable!("an acquire"),
    }
}

/// Any other script.
fn call(s: &mut Server, ctx: &mut Ctx, op: &Op, eviction: Time) -> Answer {
    match *op {
        Op::Release { c, token } => {
            let done = scripts::release(s, ctx, c, token.0, eviction);
            match done.acted_on {
                _ if done.more => Answer::More,
                None => Answer::Int(-1),
                Some(t) => Answer::Int(holds_left(s, c, t)),
            }
        }
        Op::Renew { c, lease } => Answer::Int(i64::from(scripts::renew(s, ctx, c, lease))),
        Op::Abandon { c, pass_on } => {
            scripts::abandon(s, ctx, c, pass_on);
            Answer::Int(0)
        }
        Op::FairAbandon { c, n } => {
            let granted = s.lock.as_ref().map(|l| &l.fair) == Some(&Some(FairMark::Wait((c, n))));
            match fair::fair_abandon(s, ctx, c, (c, n), eviction) {
                true => Answer::More,
                false => Answer::Int(i64::from(granted)),
            }
        }
        Op::Heartbeat { c, n } => {
            // heartbeat.lua's answer: 0 no longer queued, 1 queued behind a holder, 2 queued
            // while the lock is free (the model's function answers nothing)
            let queued = s.heartbeats.contains_key(&(c, n));
            fair::heartbeat(s, ctx, (c, n), eviction);
            let held = s.lock.is_some() || s.plain.is_some();
            Answer::Int(match (queued, held) {
                (false, _) => 0,
                (true, true) => 1,
                (true, false) => 2,
            })
        }
        Op::GrantOn { .. } => match fair::grant_on(s, ctx, eviction) {
            true => Answer::More,
            false => Answer::Int(0),
        },
        _ => unreachable!("a script step"),
    }
}

fn acquired(got: Acquired) -> Answer {
    match got {
        Acquired::Token(t) => Answer::Token(t),
        Acquired::Busy => Answer::Busy(0),
        Acquired::Fair => Answer::Fair,
    }
}

/// What is left of the lock's lease (a hash's or a plain lock's), in ticks (0: no lock, or one
/// without a lease).
fn lease_left(s: &Server, now: Time) -> u64 {
    let plain = s.plain.as_ref().map(|p| p.expires);
    (s.lock.as_ref().and_then(|l| l.expires).or(plain))
        .map_or(0, |e| u64::from(e.saturating_sub(now)))
}

/// The holds `c` has left of the hold made under `token` (0: it ended).
fn holds_left(s: &Server, c: Client, token: u64) -> i64 {
    s.lock
        .as_ref()
        .filter(|l| l.token == Some(token))
        .and_then(|l| l.holds.get(&c))
        .map_or(0, |n| i64::from(*n))
}

fn message((c, msg): (Client, Msg)) -> (Client, Message) {
    let msg = match msg {
        Msg::Free => Message::Free,
        Msg::Grant(w, token) => Message::Grant(names::waiter(w), token),
    };
    (c, msg)
}
