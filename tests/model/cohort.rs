//! Cohorts (src/manager/cohort*.rs): a second request of a holding process waits for the hold in
//! memory, and the release hands the hold to it with the next token of the block the server
//! reserved, without a script call. A hand-off needs the server's word on the hold from a call
//! begun less than 10 ms before (`LostSignal::prove`: the acquisition, a renewal, or a
//! confirmation asked for the hand-off); a confirmation that finds the hold gone loses it, and
//! the waiting request takes the lock from the server instead.

use crate::clients::lose;
use crate::model::{Action, LockModel};
use crate::plain::holds_plain;
use crate::state::{Client, Phase, Proc, State};

impl LockModel {
    /// The cohort steps `p` (process `c`) may take; `live`: its hold's `lost()` has not fired.
    pub(crate) fn cohort_actions(&self, c: Client, p: &Proc, live: bool, out: &mut Vec<Action>) {
        if !self.cfg.cohorts {
            return;
        }
        let idle = p.phase == Phase::Idle;
        if live && idle && p.budget > 0 && !p.cohort {
            out.push(Action::CohortWait(c));
        }
        // a hand-off passes the whole hold: the holder's re-entries are gone first
        if p.cohort && p.guards.len() == 1 {
            let proven = p.proven.is_some() && p.proven == p.guards.first().map(|g| g.token);
            if proven || self.cfg.defects.handoff_unproven {
                out.push(Action::HandOff(c));
            } else {
                out.push(Action::Confirm(c));
            }
        }
    }

    pub(crate) fn step_cohort(&self, s: &mut State, action: &Action) {
        match *action {
            Action::CohortWait(c) => {
                let p = &mut s.procs[usize::from(c)];
                p.budget -= 1;
                p.cohort = true;
            }
            Action::Confirm(c) => {
                // one read: does the server hold this hold? (Each cohort's owner id is made for
                // its one hold, so the model's owner-and-token stands for the real owner id.)
                let token = s.procs[usize::from(c)].guards[0].token;
                let p = &s.procs[usize::from(c)];
                let plain = p
                    .plain
                    .is_some_and(|fair| holds_plain(&s.server, c, fair, token));
                let held = plain
                    || s.server.lock.as_ref().is_some_and(|l| {
                        l.token == Some(token)
                            && l.holds.contains_key(&c)
                            && l.expires > Some(s.now)
                    });
                if held {
                    s.procs[usize::from(c)].proven = Some(token);
                } else {
                    lose(s, c);
                }
            }
            Action::HandOff(c) => {
                let p = &mut s.procs[usize::from(c)];
                let guard = &mut p.guards[0];
                // the next token of the block the server reserved with the hold
                guard.fence += 1;
                let token = guard.fence;
                if token <= s.ghost.max_token {
                    s.ghost.token_regressed = true;
                }
                s.ghost.max_token = s.ghost.max_token.max(token);
                // a new holder, whose hold no restart before it excuses
                p.forgotten = false;
                p.cohort = false;
                if self.cfg.liveness {
                    s.ghost.took |= 1 << c;
                }
            }
            _ => unreachable!("a cohort step"),
        }
    }

    /// A request waiting in memory for a hold that went (released, or lost) takes the lock from
    /// the server instead.
    pub(crate) fn cohorts_to_backend(&self, s: &mut State) {
        let lease = self.cfg.leases[0];
        for p in s
            .procs
            .iter_mut()
            .filter(|p| p.cohort && p.guards.is_empty())
        {
            p.cohort = false;
            p.phase = Phase::Exclusive {
                lease,
                recorded: false,
            };
        }
    }
}

#[test]
fn the_cohorts_keep_every_property() {
    let mut cfg = crate::small();
    cfg.cohorts = true;
    // the fair queue's dead waiters are the main check's: they meet no hand-off
    cfg.dead_queue = false;
    crate::check_exhaustively("cohorts", LockModel { cfg }, crate::depth());
}
