//! The steps of the shared locks' client processes: a request acquires a read, a write or a
//! permit, waits, is granted, renews, releases, learns it lost the hold, or gives up; a read
//! joins its process's held read in memory (a read group, src/manager/read_group.rs), which
//! needs the server's word on the hold from a call begun less than 10 ms before: without it, the
//! group asks for a confirmation, which loses a hold the server no longer has.

use crate::shared_model::{SharedAction as A, SharedModel};
use crate::shared_scripts::{self as scripts, Ask, SharedAnswer, SharedCtx};
use crate::shared_state::{Family, Kind, Member, SharedHold, SharedPhase, SharedProc, SharedState};
use crate::state::Client;

impl SharedModel {
    pub(crate) fn client_actions(&self, s: &SharedState, actions: &mut Vec<A>) {
        for (i, p) in s.procs.iter().enumerate().filter(|(_, p)| p.alive) {
            let c = i as Client;
            let idle = p.phase == SharedPhase::Idle;
            if idle && p.hold.is_none() && p.budget > 0 {
                actions.extend(self.cfg.kinds.iter().map(|k| A::Acquire(c, *k)));
            }
            if let SharedPhase::Waiting { queued, .. } = p.phase {
                actions.extend([A::Retry(c), A::Abandon(c)]);
                if queued {
                    actions.push(A::Heartbeat(c));
                }
            }
            actions.extend((0..p.inbox.len()).map(|m| A::ReadMsg(c, m)));
            let live = p.hold.is_some() && s.now < p.deadline;
            if p.hold.is_some() {
                actions.push(A::Release(c));
                actions.push(if live { A::Renew(c) } else { A::Lost(c) });
            }
            if !p.late_releases.is_empty() {
                actions.push(A::LateRelease(c));
            }
            if p.grant_on {
                actions.push(A::GrantOn(c));
            }
            if live && idle && self.may_join(p) {
                let proven = p.proven || self.cfg.defects.join_unproven;
                actions.push(if proven { A::Join(c) } else { A::Confirm(c) });
            }
        }
    }

    /// Whether a read of `p` could join its held read in memory, proof aside.
    fn may_join(&self, p: &SharedProc) -> bool {
        let Some(hold) = &p.hold else {
            return false;
        };
        let joined = hold.members.len() - 1;
        self.cfg.family == Family::ReadWrite
            && hold.kind == Kind::Read
            && p.budget > 0
            && joined < usize::from(self.cfg.joins)
    }

    pub(crate) fn step_client(&self, s: &mut SharedState, action: &A) {
        let alive: Vec<bool> = s.procs.iter().map(|p| p.alive).collect();
        let mut ctx = self.ctx(s, &alive);
        match *action {
            A::Acquire(..) | A::Retry(_) | A::ReadMsg(..) | A::Abandon(_) | A::Heartbeat(_) => {
                self.step_wait(s, &mut ctx, action)
            }
            _ => self.step_hold(s, &mut ctx, action),
        }
        for (c, waiter, token) in std::mem::take(&mut ctx.out) {
            s.procs[usize::from(c)].inbox.push((waiter, token));
        }
    }

    /// A step of a waiting request (or the start of one).
    fn step_wait(&self, s: &mut SharedState, ctx: &mut SharedCtx, action: &A) {
        match *action {
            A::Acquire(c, kind) => {
                let p = &mut s.procs[usize::from(c)];
                p.budget -= 1;
                let waiter = (c, p.next_wait);
                p.next_wait += 1;
                p.phase = SharedPhase::Waiting {
                    kind,
                    waiter,
                    queued: false,
                };
                self.attempt(s, ctx, c);
            }
            A::Retry(c) => self.attempt(s, ctx, c),
            A::ReadMsg(c, m) => {
                let (w, _) = s.procs[usize::from(c)].inbox.remove(m);
                match s.procs[usize::from(c)].phase {
                    // taken up by the waiter's confirming call, which finds its grant
                    SharedPhase::Waiting { waiter, .. } if waiter == w => self.attempt(s, ctx, c),
                    // a grant nobody here can use is passed on
                    _ => self.abandon(s, ctx, c, w),
                }
            }
            A::Abandon(c) => {
                let phase =
                    std::mem::replace(&mut s.procs[usize::from(c)].phase, SharedPhase::Idle);
                if let SharedPhase::Waiting { waiter, .. } = phase {
                    self.abandon(s, ctx, c, waiter);
                }
            }
            A::Heartbeat(c) => {
                if let SharedPhase::Waiting { waiter, .. } = s.procs[usize::from(c)].phase {
                    scripts::shared_heartbeat(&mut s.server, ctx, waiter, self.cfg.eviction);
                }
            }
            _ => unreachable!("a step of a holder"),
        }
    }

    /// A step of a holding process (or of one whose hold was lost).
    fn step_hold(&self, s: &mut SharedState, ctx: &mut SharedCtx, action: &A) {
        match *action {
            A::Release(c) => {
                let p = &mut s.procs[usize::from(c)];
                let hold = p.hold.as_mut().expect("holding");
                hold.members.pop();
                if hold.members.is_empty() {
                    let token = hold.token;
                    p.hold = None;
                    self.release(s, ctx, c, token);
                }
            }
            A::LateRelease(c) => {
                let token = s.procs[usize::from(c)].late_releases.remove(0);
                self.release(s, ctx, c, token);
            }
            A::Renew(c) => {
                let (now, lease) = (s.now, self.cfg.lease);
                let p = &mut s.procs[usize::from(c)];
                let token = p.hold.as_ref().expect("holding").token;
                if scripts::shared_renew(&mut s.server, ctx, c, token, lease) {
                    p.deadline = p.deadline.max(now + lease);
                    p.proven = true;
                } else {
                    lose(p);
                }
            }
            A::Lost(c) => lose(&mut s.procs[usize::from(c)]),
            A::GrantOn(c) => {
                let more = scripts::shared_grant_on(&mut s.server, ctx, self.cfg.eviction);
                s.procs[usize::from(c)].grant_on = more;
            }
            A::Join(c) => self.join(s, c),
            A::Confirm(c) => {
                let p = &mut s.procs[usize::from(c)];
                let token = p.hold.as_ref().expect("holding").token;
                if scripts::holds(&s.server, c, token) {
                    p.proven = true;
                } else {
                    lose(p);
                }
            }
            _ => unreachable!("an environment step"),
        }
    }

    /// One attempt of the waiting request of `c`.
    fn attempt(&self, s: &mut SharedState, ctx: &mut SharedCtx, c: Client) {
        let SharedPhase::Waiting {
            kind,
            waiter,
            queued,
        } = s.procs[usize::from(c)].phase
        else {
            return;
        };
        let ask = Ask {
            owner: c,
            lease: self.cfg.lease,
            queued,
            eviction: self.cfg.eviction,
            waiter,
            kind,
            held: None,
        };
        match scripts::shared_acquire(&mut s.server, ctx, &ask) {
            SharedAnswer::Token(token) => {
                fresh_token(s, kind, token);
                let p = &mut s.procs[usize::from(c)];
                p.hold = Some(SharedHold {
                    token,
                    kind,
                    members: vec![Member {
                        fence: token,
                        forgotten: false,
                    }],
                    last: token,
                });
                p.deadline = s.now + self.cfg.lease;
                p.proven = true;
                p.phase = SharedPhase::Idle;
            }
            // (a process holds nothing while it waits: it never asks to upgrade a read)
            SharedAnswer::Upgrade => s.procs[usize::from(c)].phase = SharedPhase::Idle,
            SharedAnswer::Busy { .. } => {
                s.procs[usize::from(c)].phase = SharedPhase::Waiting {
                    kind,
                    waiter,
                    queued: true,
                };
            }
        }
    }

    /// A read of `c` joins its process's held read, with the next token of the hold's block.
    fn join(&self, s: &mut SharedState, c: Client) {
        let p = &mut s.procs[usize::from(c)];
        p.budget -= 1;
        let hold = p.hold.as_mut().expect("holding");
        hold.last += 1;
        let fence = hold.last;
        hold.members.push(Member {
            fence,
            forgotten: false,
        });
        fresh_token(s, Kind::Read, fence);
    }

    fn abandon(&self, s: &mut SharedState, ctx: &mut SharedCtx, c: Client, waiter: (Client, u8)) {
        let claim = self.cfg.eviction;
        let more = scripts::shared_abandon(&mut s.server, ctx, c, waiter, claim);
        s.procs[usize::from(c)].grant_on |= more;
    }

    fn release(&self, s: &mut SharedState, ctx: &mut SharedCtx, c: Client, token: u64) {
        let claim = self.cfg.eviction;
        let (acted_on, more) = scripts::shared_release(&mut s.server, ctx, c, token, claim);
        if acted_on.is_some_and(|t| t != token) {
            s.ghost.touched_foreign = true;
        }
        s.procs[usize::from(c)].grant_on |= more;
    }
}

/// A request got `token` for a hold of `kind`: it must be above every earlier token of a hold it
/// excludes (a read's, every write's; a write's or a permit's, every one's).
fn fresh_token(s: &mut SharedState, kind: Kind, token: u64) {
    let g = &mut s.ghost;
    let floor = if kind == Kind::Read {
        g.max_write
    } else {
        g.max_token
    };
    g.token_regressed |= token <= floor;
    g.max_token = g.max_token.max(token);
    if kind == Kind::Write {
        g.max_write = g.max_write.max(token);
    }
}

/// `lost()` fires: every member goes, and the hold's release is sent (it may land late).
pub(crate) fn lose(p: &mut SharedProc) {
    if let Some(hold) = p.hold.take() {
        p.late_releases.push(hold.token);
    }
}
