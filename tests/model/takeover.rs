//! Dead holders' takeover (DESIGN.md, "Dead holders"): a waiter probes the lock's holder with
//! takeover.lua, and a hold whose manager was seen missing twice a grace apart, with no renewal
//! between, ends as its release would. The holder's `lost()` also fires a grace less the drift
//! allowance after `max(R, P)` (`src/inbox_proof.rs`, `src/lease.rs`).
//!
//! Implementation notes: an inbox is subscribed or not. A death, a restart or a `CLIENT KILL`
//! (`Cut`) unsubscribes it; a live process subscribes again later; a pause or a partition leaves
//! it subscribed. A PING proves the live connection, and counts only if that connection was
//! subscribed before R. A taken grant's R is its `since`; PINGs answered before it was taken
//! are not credited (an earlier deadline than the crate's). Plain holds are not probed.

use crate::model::{Action, LockModel};
use crate::scripts::{self, Ctx};
use crate::state::{Client, Mark, Proc, State, Time};

/// The server closes the inbox connection of `p`: what was in flight is lost.
pub fn cut(p: &mut Proc) {
    p.subscribed = false;
    p.inbox.clear();
}

impl LockModel {
    /// When the hold of `p` is lost, in the clients' time: at its lease's end, or a grace less
    /// the drift allowance after its last renewal or counted proof.
    pub fn lost_at(&self, p: &Proc) -> Time {
        match self.cfg.takeover {
            Some(grace) => {
                let silence = (p.heard + grace).saturating_sub(self.cfg.drift);
                p.deadline.min(silence)
            }
            None => p.deadline,
        }
    }

    /// A call begun at `now` made or renewed the hold of `p`: R moves there.
    pub(crate) fn renewed_at(p: &mut Proc, now: Time) {
        p.heard = p.heard.max(now);
        p.proofs_count = p.subscribed;
    }

    /// The takeover's steps `c` may take: subscribe again, PING, or probe the lock it waits for.
    pub(crate) fn takeover_actions(&self, s: &State, c: Client, actions: &mut Vec<Action>) {
        if self.cfg.takeover.is_none() {
            return;
        }
        let p = &s.procs[usize::from(c)];
        // a lost() that fired stays fired: no later proof revives the hold
        let live = s.client_now() < self.lost_at(p);
        if !p.subscribed {
            actions.push(Action::Subscribe(c));
        } else if !p.guards.is_empty() && p.heard < s.client_now() && live {
            actions.push(Action::Ping(c));
        }
        let held = s.server.lock.as_ref().is_some_and(|l| !l.holds.is_empty());
        if p.phase != crate::state::Phase::Idle && held {
            actions.push(Action::Probe(c));
        }
    }

    pub(crate) fn step_takeover(&self, s: &mut State, ctx: &mut Ctx, action: &Action) {
        let now = s.client_now();
        match *action {
            Action::Subscribe(c) => {
                let p = &mut s.procs[usize::from(c)];
                p.subscribed = true;
                (p.proofs_count, p.since_subscribed) = (false, false);
            }
            Action::Ping(c) => {
                let p = &mut s.procs[usize::from(c)];
                if p.proofs_count || self.cfg.defects.proofs_before_renewal {
                    p.heard = p.heard.max(now);
                }
            }
            Action::Probe(_) => self.probe(s, ctx),
            _ => unreachable!("not a takeover step"),
        }
    }

    /// takeover.lua on the lock's one hold, on the server's clock.
    fn probe(&self, s: &mut State, ctx: &mut Ctx) {
        let Some(grace) = self.cfg.takeover else {
            return;
        };
        let Some(l) = s.server.lock.as_ref() else {
            return;
        };
        let (Some(&owner), Some(token)) = (l.holds.keys().next(), l.token) else {
            return;
        };
        let listens = s
            .procs
            .get(usize::from(owner))
            .is_some_and(|p| p.subscribed);
        if listens {
            s.server.mark = None;
            return;
        }
        let same = |m: &&Mark| (m.owner, m.token) == (owner, token);
        let since = s.server.mark.as_ref().filter(same).map(|m| m.since);
        let missing_for = since.map(|t| s.now - t);
        let ended = if self.cfg.defects.takeover_on_one_miss {
            true
        } else {
            missing_for.is_some_and(|d| d >= grace)
        };
        if ended {
            s.server.mark = None;
            self.pass_on(s, ctx, token);
        } else if since.is_none() {
            let expires = l.expires;
            s.server.mark = Some(Mark {
                since: s.now,
                owner,
                token,
                expires,
            });
        }
    }

    /// The ended hold's block retired, the lock goes on as its release would pass it.
    fn pass_on(&self, s: &mut State, ctx: &mut Ctx, token: u64) {
        s.server.lock = None;
        scripts::retire_block(&mut s.server, ctx, token);
        if s.server.waiters.is_empty() && s.server.queue.is_empty() {
            return;
        }
        let claim = self.server_eviction();
        let (granted, _more) = scripts::grant_next(&mut s.server, ctx, claim, None);
        if granted.is_none() {
            scripts::notify_next(&mut s.server, ctx);
        }
    }
}
