//! The steps of the client processes: a request acquires (exclusive or fair), waits, is woken,
//! re-enters, renews (the watchdog, `renewals.rs`), releases, learns it lost the lock, or gives
//! up waiting. A process that takes no step while the clock advances is a paused one.

use crate::fair;
use crate::model::{Action, LockModel};
use crate::scripts::{self, Acquired};
use crate::state::{Client, Guard, Msg, Phase, State};

impl LockModel {
    pub(crate) fn client_actions(&self, s: &State, actions: &mut Vec<Action>) {
        for (i, p) in s
            .procs
            .iter()
            .enumerate()
            .take(usize::from(self.cfg.clients))
        {
            let c = i as Client;
            if !p.alive {
                continue;
            }
            let holding = !p.guards.is_empty();
            let live = holding && s.client_now() < self.lost_at(p);
            let free_hand = p.phase == Phase::Idle && p.budget > 0 && !p.cohort;
            // (a cohort's leader re-enters its plain lock in memory, not by a script)
            let reenters = p.plain != Some(false);
            if free_hand && p.guards.len() < 2 && (!holding || live && reenters) {
                for &lease in &self.cfg.leases {
                    for fair in [false, true] {
                        actions.push(Action::Acquire { c, lease, fair });
                    }
                }
            }
            // the liveness check's waiters are patient, and retry only when told to at once
            let timers = !self.cfg.liveness;
            // (with a grant in its ticket, the acquire loop's next turn is `TakeGrant`)
            if p.phase != Phase::Idle && (timers || p.again) && p.grant.is_none() {
                actions.push(Action::Retry(c));
            }
            if p.phase != Phase::Idle && timers {
                actions.push(Action::Abandon(c));
            }
            if matches!(p.phase, Phase::Fair { queued: true, .. }) && timers {
                actions.push(Action::Heartbeat(c));
            }
            for m in 0..p.inbox.len() {
                actions.push(Action::ReadMsg(c, m));
            }
            if holding {
                actions.push(Action::Release(c));
            }
            self.cohort_actions(c, p, live, actions);
            self.plain_actions(s, c, actions);
            if live && timers {
                self.renew_actions(c, p, actions);
            }
            if holding && !live {
                actions.push(Action::Lost(c));
            }
            if !p.late_releases.is_empty() {
                actions.push(Action::LateRelease(c));
            }
            if p.grant_on {
                actions.push(Action::GrantOn(c));
            }
            if p.grant.is_some() {
                actions.push(Action::TakeGrant(c));
            }
            self.takeover_actions(s, c, actions);
        }
    }

    pub(crate) fn step_client(&self, s: &mut State, action: &Action) {
        // with takeover, a manager listens while its inbox is subscribed
        let takeover = self.cfg.takeover.is_some();
        let listening = |p: &crate::state::Proc| p.alive && (p.subscribed || !takeover);
        let alive: Vec<bool> = s.procs.iter().map(listening).collect();
        let mut ctx = self.ctx(s, &alive);
        let eviction = self.server_eviction();
        match *action {
            Action::Acquire { c, lease, fair } => {
                let p = &mut s.procs[usize::from(c)];
                p.budget -= 1;
                p.phase = if fair {
                    let waiter = (c, p.next_wait);
                    p.next_wait += 1;
                    Phase::Fair {
                        lease,
                        waiter,
                        queued: false,
                    }
                } else {
                    Phase::Exclusive {
                        lease,
                        recorded: false,
                    }
                };
                // a re-entry does not wait
                let wait = p.guards.is_empty();
                self.attempt(s, &mut ctx, c, wait);
            }
            Action::Retry(c) => self.attempt(s, &mut ctx, c, true),
            Action::ReadMsg(c, m) => self.read_msg(s, &mut ctx, c, m),
            Action::Abandon(c) => {
                let p = &mut s.procs[usize::from(c)];
                (p.grant, p.busy_attempts) = (None, 0);
                match std::mem::replace(&mut p.phase, Phase::Idle) {
                    Phase::Fair { waiter, .. } => {
                        let more = fair::fair_abandon(&mut s.server, &mut ctx, c, waiter, eviction);
                        s.procs[usize::from(c)].grant_on |= more;
                    }
                    _ => scripts::abandon(&mut s.server, &mut ctx, c, false),
                }
            }
            Action::Heartbeat(c) => {
                if let Phase::Fair { waiter, .. } = s.procs[usize::from(c)].phase {
                    let queued = s.server.heartbeats.contains_key(&waiter);
                    fair::heartbeat(&mut s.server, &ctx, waiter, eviction);
                    if queued && self.cfg.take_grants {
                        let now = s.client_now();
                        let p = &mut s.procs[usize::from(c)];
                        if now >= p.since {
                            (p.since, p.since_subscribed) = (now, p.subscribed);
                        }
                    }
                }
            }
            Action::TakeGrant(c) => self.take_grant(s, c),
            Action::Release(c) => self.release_guard(s, &mut ctx, c),
            Action::LateRelease(c) => match s.procs[usize::from(c)].late_releases.remove(0) {
                (token, Some(fair)) => self.release_plain(s, &mut ctx, c, token, fair, token),
                (token, None) => self.release(s, &mut ctx, c, token),
            },
            Action::PlainAcquire { c, lease, fair } => {
                self.plain_acquire(s, &mut ctx, c, lease, fair)
            }
            Action::Renew { c, lease } => self.renew(s, &ctx, c, lease),
            Action::RenewUnanswered { c, lease, reached } => {
                self.renew_unanswered(s, &ctx, c, lease, reached)
            }
            Action::Lost(c) => lose(s, c),
            Action::GrantOn(c) => {
                let more = fair::grant_on(&mut s.server, &mut ctx, eviction);
                s.procs[usize::from(c)].grant_on = more;
            }
            Action::CohortWait(_) | Action::Confirm(_) | Action::HandOff(_) => {
                self.step_cohort(s, action)
            }
            Action::Subscribe(_) | Action::Ping(_) | Action::Probe(_) => {
                self.step_takeover(s, &mut ctx, action)
            }
            _ => unreachable!("an environment step"),
        }
        self.cohorts_to_backend(s);
        let out = std::mem::take(&mut ctx.out);
        LockModel::deliver(s, out);
    }

    /// `c` reads message `m` of its inbox: a wake-up or a grant for its request, or one nobody
    /// here can use, which is passed on.
    fn read_msg(&self, s: &mut State, ctx: &mut scripts::Ctx, c: Client, m: usize) {
        let msg = s.procs[usize::from(c)].inbox.remove(m);
        let phase = s.procs[usize::from(c)].phase.clone();
        match (msg, phase) {
            (Msg::Free, Phase::Exclusive { .. }) => self.attempt(s, ctx, c, true),
            (Msg::Grant(w, token), Phase::Fair { waiter, .. }) if w == waiter => {
                if self.cfg.take_grants {
                    // the ticket keeps it for the acquire loop's next turn (`TakeGrant`)
                    s.procs[usize::from(c)].grant = Some(token);
                } else {
                    // taken up by the waiter's confirming call (fair_acquire finds its grant)
                    self.attempt(s, ctx, c, true)
                }
            }
            (Msg::Free, _) => scripts::abandon(&mut s.server, ctx, c, true),
            (Msg::Grant(w, _), _) => {
                let eviction = self.server_eviction();
                let more = fair::fair_abandon(&mut s.server, ctx, c, w, eviction);
                s.procs[usize::from(c)].grant_on |= more;
            }
        }
    }

    /// One attempt of the request of `c`: its acquire script, and what the answer makes of it.
    fn attempt(&self, s: &mut State, ctx: &mut scripts::Ctx, c: Client, wait: bool) {
        let eviction = self.server_eviction();
        s.procs[usize::from(c)].again = false;
        let p = &s.procs[usize::from(c)];
        let held = p.guards.first().map(|g| g.token);
        let held_plain = p.plain == Some(true);
        let answer = match p.phase.clone() {
            Phase::Exclusive { lease, recorded } => {
                let mode = if !wait {
                    0
                } else if recorded {
                    2
                } else {
                    1
                };
                let asked = self.server_lease(lease);
                let answer = scripts::acquire(&mut s.server, ctx, c, asked, mode, held);
                if answer == Acquired::Fair && wait {
                    // the request waits in the fair queue from now on (it asks at once)
                    let p = &mut s.procs[usize::from(c)];
                    p.again = self.cfg.liveness;
                    let waiter = (c, p.next_wait);
                    p.next_wait += 1;
                    p.busy_attempts = 0;
                    p.phase = Phase::Fair {
                        lease,
                        waiter,
                        queued: false,
                    };
                    return;
                }
                if answer == Acquired::Busy && wait {
                    s.procs[usize::from(c)].phase = Phase::Exclusive {
                        lease,
                        recorded: true,
                    };
                }
                (answer, lease)
            }
            Phase::Fair {
                lease,
                waiter,
                queued,
            } => {
                let answer = fair::fair_acquire(
                    &mut s.server,
                    ctx,
                    c,
                    self.server_lease(lease),
                    wait,
                    queued,
                    eviction,
                    waiter,
                    (held, held_plain),
                );
                if !matches!(answer, Acquired::Token(_)) && wait {
                    let now = s.client_now();
                    let p = &mut s.procs[usize::from(c)];
                    if self.cfg.take_grants {
                        p.busy_attempts = p.busy_attempts.saturating_add(1);
                        (p.since, p.since_subscribed) = (now, p.subscribed);
                    }
                    p.phase = Phase::Fair {
                        lease,
                        waiter,
                        queued: true,
                    };
                    p.again = self.cfg.liveness && answer == Acquired::Fair;
                }
                (answer, lease)
            }
            Phase::Idle => return,
        };
        self.took(s, c, answer.0, answer.1, wait);
    }

    pub(crate) fn took(&self, s: &mut State, c: Client, answer: Acquired, lease: u8, wait: bool) {
        let now = s.client_now();
        let p = &mut s.procs[usize::from(c)];
        match answer {
            Acquired::Token(token) => {
                if p.guards.is_empty() {
                    if token <= s.ghost.max_token {
                        s.ghost.token_regressed = true;
                    }
                    s.ghost.max_token = s.ghost.max_token.max(token);
                    p.deadline = now + lease;
                    p.forgotten = false;
                    (p.heard, p.proofs_count) = (now, p.subscribed);
                } else {
                    p.deadline = p.deadline.max(now + lease);
                    // a fair re-entry made a plain lock a hash
                    p.plain = None;
                }
                p.guards.push(Guard {
                    token,
                    lease,
                    fence: token,
                });
                p.phase = Phase::Idle;
                p.grant = None;
                p.proven = self.cfg.cohorts.then_some(token);
                if self.cfg.liveness {
                    s.ghost.took |= 1 << c;
                }
            }
            _ if !wait => p.phase = Phase::Idle,
            _ => {}
        }
    }

    /// A guard of `c` is released: the last one of a plain hold by plain_release.lua, any other
    /// by release.lua.
    fn release_guard(&self, s: &mut State, ctx: &mut scripts::Ctx, c: Client) {
        let p = &mut s.procs[usize::from(c)];
        let guard = p.guards.pop().expect("holding");
        match p.plain.filter(|_| p.guards.is_empty()) {
            Some(fair) => {
                p.plain = None;
                self.release_plain(s, ctx, c, guard.token, fair, guard.fence);
            }
            None => self.release(s, ctx, c, guard.token),
        }
    }

    fn release(&self, s: &mut State, ctx: &mut scripts::Ctx, c: Client, token: u64) {
        let done = scripts::release(&mut s.server, ctx, c, token, self.server_eviction());
        if done.acted_on.is_some_and(|t| t != token) {
            s.ghost.touched_foreign = true;
        }
        s.procs[usize::from(c)].grant_on |= done.more;
    }
}

/// `lost()` fires: the guards go, each sending its release (which may land late).
pub(crate) fn lose(s: &mut State, c: Client) {
    let p = &mut s.procs[usize::from(c)];
    let plain = p.plain.take();
    let tokens: Vec<_> = p.guards.drain(..).map(|g| (g.token, plain)).collect();
    p.late_releases.extend(tokens);
}
