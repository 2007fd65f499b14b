//! The watchdog's renewals of a hold: answered, or unanswered whether they reached the server
//! or not. A renewal that finds the hold gone loses it; one that renews it deletes its takeover
//! mark and moves R (`takeover.rs`).

use crate::clients::lose;
use crate::model::{Action, LockModel};
use crate::scripts;
use crate::state::{Client, Server, State};

impl LockModel {
    /// The watchdog's renewals of the live hold of `p` (process `c`), answered or not.
    pub(crate) fn renew_actions(
        &self,
        c: Client,
        p: &crate::state::Proc,
        actions: &mut Vec<Action>,
    ) {
        for g in &p.guards {
            actions.push(Action::Renew { c, lease: g.lease });
            if self.cfg.unanswered {
                for reached in [false, true] {
                    let lease = g.lease;
                    actions.push(Action::RenewUnanswered { c, lease, reached });
                }
            }
        }
    }

    /// A renewal of the hold of `c` whose answer never comes (`reached`: the server ran it):
    /// the client counts its deadline from the last answer, so it stays.
    pub(crate) fn renew_unanswered(
        &self,
        s: &mut State,
        ctx: &scripts::Ctx,
        c: Client,
        lease: u8,
        reached: bool,
    ) {
        if reached {
            self.renew_script(s, ctx, c, lease);
        }
        if self.cfg.defects.trust_unanswered {
            let now = s.client_now();
            let p = &mut s.procs[usize::from(c)];
            p.deadline = p.deadline.max(now + lease);
        }
    }

    /// The watchdog renews the hold of `c` with `lease`: a renewal that finds it gone loses it.
    pub(crate) fn renew(&self, s: &mut State, ctx: &scripts::Ctx, c: Client, lease: u8) {
        let now = s.client_now();
        let renewed = self.renew_script(s, ctx, c, lease);
        let p = &mut s.procs[usize::from(c)];
        if renewed {
            p.deadline = p.deadline.max(now + lease);
            LockModel::renewed_at(p, now);
            p.proven = self
                .cfg
                .cohorts
                .then(|| server_token(&s.server, c))
                .flatten();
        } else {
            lose(s, c);
        }
    }

    /// renew.lua for the hold of `c`, asking the server for `lease` and the drift allowance.
    pub(crate) fn renew_script(
        &self,
        s: &mut State,
        ctx: &scripts::Ctx,
        c: Client,
        lease: u8,
    ) -> bool {
        let p = &s.procs[usize::from(c)];
        let held = p.guards.first().map_or(0, |g| g.token);
        let lease = self.server_lease(lease);
        let renewed = match p.plain {
            Some(fair) => crate::plain::renew_plain(&mut s.server, ctx, (c, fair, held), lease),
            None => scripts::renew(&mut s.server, ctx, c, lease),
        };
        if renewed && !self.cfg.defects.renewal_keeps_mark {
            s.server.mark = None;
        }
        renewed
    }
}

/// The token of the hold of `owner` the server has, if any (a renewal's proof: by owner).
fn server_token(s: &Server, owner: Client) -> Option<u64> {
    let plain = s
        .plain
        .as_ref()
        .filter(|p| p.owner == owner)
        .map(|p| p.hold);
    let hash = s.lock.as_ref().filter(|l| l.holds.contains_key(&owner));
    plain.or(hash.and_then(|l| l.token))
}
