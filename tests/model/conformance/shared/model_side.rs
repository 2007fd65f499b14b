//! The model side of a shared lock's sequence: the functions of `shared_scripts.rs` on a model
//! server, one per step.

use super::super::names;
use super::super::outcome::{Answer, Message, Outcome};
use super::ops::SharedOp;
use super::SharedNames;
use crate::defects::Defects;
use crate::model::Loss;
use crate::shared_scripts::{self as scripts, has_room, Ask, SharedAnswer, SharedCtx};
use crate::shared_state::{Family, Kind, SharedServer};
use crate::state::{Time, Waiter};

/// The model server of one shared lock, its clock and snapshot, and which managers listen.
pub struct SharedModelSide {
    pub server: SharedServer,
    pub now: Time,
    pub snapshot: Option<SharedServer>,
    pub alive: Vec<bool>,
    pub family: Family,
    /// The heartbeat deadline and claim lease, in ticks.
    pub eviction: Time,
    pub defects: Defects,
    /// Each wait's kind (the last letter of its id on the server).
    pub names: SharedNames,
}

impl SharedModelSide {
    /// A clean server of a `family` lock with `clients` live managers.
    pub fn new(clients: u8, family: Family, eviction: Time) -> SharedModelSide {
        SharedModelSide {
            server: SharedServer::default(),
            now: 0,
            snapshot: None,
            alive: vec![true; usize::from(clients)],
            family,
            eviction,
            defects: Defects::default(),
            names: SharedNames::default(),
        }
    }

    /// Runs one step.
    pub fn step(&mut self, op: &SharedOp) -> Outcome {
        if let SharedOp::Acquire { c, n, kind, .. }
        | SharedOp::Abandon { c, n, kind }
        | SharedOp::Heartbeat { c, n, kind } = *op
        {
            self.names.kinds.insert((c, n), kind);
        }
        let mut ctx = SharedCtx {
            now: self.now,
            defects: self.defects,
            family: self.family,
            alive: &self.alive,
            out: Vec::new(),
        };
        let (s, eviction) = (&mut self.server, self.eviction);
        let answer = match *op {
            SharedOp::Acquire {
                c,
                lease,
                queued,
                n,
                kind,
                held,
            } => {
                let ask = Ask {
                    owner: c,
                    lease,
                    queued,
                    eviction,
                    waiter: (c, n),
                    kind,
                    held: held.map(|t| t.0),
                };
                match scripts::shared_acquire(s, &mut ctx, &ask) {
                    SharedAnswer::Token(t) => Answer::Token(t),
                    SharedAnswer::Busy { again: true } => Answer::Again,
                    SharedAnswer::Busy { again: false } => Answer::Busy(ttl(s, ctx.now, eviction)),
                    SharedAnswer::Upgrade => Answer::Other("upgrade".to_owned()),
                }
            }
            SharedOp::Release { c, token } => {
                let count = s.hash.as_ref().and_then(|h| h.entries.get(&c));
                let count = count.map_or(0, |e| i64::from(e.count));
                match scripts::shared_release(s, &mut ctx, c, token.0, eviction) {
                    (_, true) => Answer::More,
                    (None, _) => Answer::Int(-1),
                    (Some(_), _) => Answer::Int(count - 1),
                }
            }
            SharedOp::Renew { c, lease } => {
                // the owner id is made for one hold: a renewal is by owner, whatever its token
                let token = s.hash.as_ref().and_then(|h| h.entries.get(&c));
                let token = token.map_or(0, |e| e.token);
                Answer::Int(i64::from(scripts::shared_renew(s, &ctx, c, token, lease)))
            }
            SharedOp::Abandon { c, n, .. } => {
                let entry = s.hash.as_ref().and_then(|h| h.entries.get(&c));
                let dropped = entry.is_some_and(|e| e.grant == Some((c, n)));
                match scripts::shared_abandon(s, &mut ctx, c, (c, n), eviction) {
                    true => Answer::More,
                    false => Answer::Int(i64::from(dropped)),
                }
            }
            SharedOp::Heartbeat { c, n, .. } => {
                let state = heartbeat_state(s, &ctx, (c, n));
                scripts::shared_heartbeat(s, &ctx, (c, n), eviction);
                Answer::Int(state)
            }
            SharedOp::GrantOn { .. } => match scripts::shared_grant_on(s, &mut ctx, eviction) {
                true => Answer::More,
                false => Answer::Int(0),
            },
            _ => {
                self.environment(op);
                return Outcome::quiet(Answer::Nothing);
            }
        };
        let names = &self.names;
        let messages = ctx.out.into_iter().map(|(c, w, t)| {
            let message = Message::Grant(names.waiter(w), t);
            (c, message)
        });
        Outcome {
            answer,
            messages: messages.collect(),
        }
    }

    fn environment(&mut self, op: &SharedOp) {
        match *op {
            SharedOp::Tick => self.now += 1,
            SharedOp::Snapshot => self.snapshot = Some(self.server.clone()),
            SharedOp::Restart(loss) => {
                self.now += 1;
                match loss {
                    Loss::Nothing => {}
                    Loss::ToSnapshot => self.server = self.snapshot.clone().unwrap_or_default(),
                    Loss::Everything => self.server = SharedServer::default(),
                }
            }
            SharedOp::Die(c) => self.alive[usize::from(c)] = false,
            _ => unreachable!("a script step"),
        }
        self.server.expire(self.now);
    }
}

/// A busy answer's wait in ticks: until the first holder's lease runs out, or the eviction when
/// nobody holds.
fn ttl(s: &SharedServer, now: Time, eviction: Time) -> u64 {
    let first = s.holders.values().min().copied();
    u64::from(first.map_or(eviction, |e| e.saturating_sub(now)))
}

/// heartbeat.lua's answer for a wait of a shared lock (the model's function answers nothing):
/// 0 no longer queued, 1 queued behind a holder, 2 queued while the lock may have room.
fn heartbeat_state(s: &SharedServer, ctx: &SharedCtx, waiter: Waiter) -> i64 {
    if !s.heartbeats.contains_key(&waiter) {
        return 0;
    }
    if s.hash.is_none() {
        return 2;
    }
    let first = s.holders.values().min().copied();
    if first.is_none_or(|e| e <= ctx.now) {
        return 2;
    }
    let head = s.queue.first().copied();
    let head_dead = head.is_some_and(|(w, _)| w != waiter && !s.heartbeats.contains_key(&w));
    let head_fits = head.is_some_and(|(_, kind)| has_room(s, ctx, kind));
    if head_dead || head_fits {
        2
    } else {
        1
    }
}

/// The letter of a kind of hold in a wait's id and the scripts' arguments.
pub fn letter(kind: Kind) -> char {
    match kind {
        Kind::Read => 'r',
        Kind::Write => 'w',
        Kind::Permit => 'n',
    }
}

/// The server's name of a wait: its owner's waiter id and its kind's letter.
pub fn waiter_id(w: Waiter, kind: Kind) -> String {
    format!("{}|{}", names::waiter(w), letter(kind))
}

/// The family's name in the hash (`#s`).
pub fn family_name(family: Family) -> String {
    match family {
        Family::ReadWrite => "rw".to_owned(),
        Family::Semaphore(n) => format!("s{n}"),
    }
}
