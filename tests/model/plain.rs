//! The plain path (src/backend/redis/plain/): a free lock taken without a script, as a string
//! whose value names its holder (`SET NX PX`, with the fencing counter, the server's clock and
//! whether fair requests queue read in the same write; the token worked out by the client),
//! released by plain_release.lua, renewed by value, and made a hash by a fair re-entry
//! (`unplain`). The scripts of `scripts.rs` and `fair.rs` read a plain lock as common.lua's
//! `lock_state` does.

use crate::model::{Action, LockModel};
use crate::scripts::{self, grant_next, notify_next, Ctx, Released};
use crate::state::{
    Client, FairMark, LockHash, PlainLock, Server, State, Time, TOKEN_BLOCK, US_PER_TICK,
};

/// Whether the lock is the plain hold of `owner` (in mode `fair`) made under `token`.
pub fn holds_plain(s: &Server, owner: Client, fair: bool, token: u64) -> bool {
    let value = s.plain.as_ref().map(|p| (p.owner, p.fair, p.hold));
    value == Some((owner, fair, token))
}

/// common.lua's `unplain`: the owner's plain lock `p` becomes a hash held under its token, with
/// its lease, marked (whoever waits for a plain lock never marked it), in fair mode.
pub fn unplain(s: &mut Server, p: &PlainLock) {
    s.plain = None;
    s.lock = Some(LockHash {
        holds: [(p.owner, 1)].into(),
        token: Some(p.hold),
        marked: true,
        fair: Some(FairMark::Any),
        expires: Some(p.expires),
        restored: false,
        granted: None,
    });
}

/// The plain path's commands: the token, and whether fair requests queue (the take is then
/// undone), or `None` when `SET NX` found the lock taken.
pub fn plain_take(
    s: &mut Server,
    c: &Ctx,
    owner: Client,
    lease: Time,
    fair: bool,
) -> Option<(u64, bool)> {
    if s.lock.is_some() || s.plain.is_some() {
        return None;
    }
    let token = (u64::from(c.now) * US_PER_TICK).max(s.fence.unwrap_or(0) + 1);
    s.plain = Some(PlainLock {
        owner,
        fair,
        hold: token,
        expires: c.now + lease,
        restored: false,
    });
    let queued = !s.queue.is_empty() || (fair && !s.waiters.is_empty());
    Some((token, queued))
}

/// What plain_release.lua did.
pub enum PlainReleased {
    /// -1: the lock does not hold that value.
    Lost,
    /// -2: a re-entry made it a hash; release.lua releases it by its token.
    Hash,
    /// Released; 'more' when the grant stopped at its bound.
    Done { more: bool },
}

/// plain_release.lua for the hold of `owner` (mode `fair`) under `token`; `last`: the last token
/// handed out under it, when the server's clock may not have passed it.
pub fn plain_release(
    s: &mut Server,
    c: &mut Ctx,
    (owner, fair, token): (Client, bool, u64),
    last: Option<u64>,
    claim: Time,
) -> PlainReleased {
    if !holds_plain(s, owner, fair, token) {
        return if s.lock.is_some() {
            PlainReleased::Hash
        } else {
            PlainReleased::Lost
        };
    }
    s.plain = None;
    if let Some(last) = last.filter(|_| !c.defects.plain_release_forgets) {
        s.fence = Some(last);
    }
    if s.waiters.is_empty() && s.queue.is_empty() {
        return PlainReleased::Done { more: false };
    }
    let (granted, more) = grant_next(s, c, claim, None);
    if granted.is_none() {
        notify_next(s, c);
    }
    PlainReleased::Done { more }
}

/// renew.lua for a plain hold: by its value, only ever lengthening; a hold a re-entry made a
/// hash is renewed as one. Whether it was still held.
pub fn renew_plain(
    s: &mut Server,
    c: &Ctx,
    (owner, fair, token): (Client, bool, u64),
    lease: Time,
) -> bool {
    if holds_plain(s, owner, fair, token) {
        let p = s.plain.as_mut().expect("held");
        p.expires = p.expires.max(c.now + lease);
        return true;
    }
    scripts::renew(s, c, owner, lease)
}

impl LockModel {
    /// Whether `c` may take the lock on the plain path now: a fresh request of a process that
    /// holds nothing of it (in exclusive mode, only a cohort's leader, whose owner id is made
    /// for the one hold: a re-entry would not see a plain lock).
    pub(crate) fn plain_actions(&self, s: &State, c: Client, out: &mut Vec<Action>) {
        let p = &s.procs[usize::from(c)];
        let fresh = p.phase == crate::state::Phase::Idle && p.guards.is_empty() && !p.cohort;
        if !self.cfg.plain || !fresh || p.budget == 0 {
            return;
        }
        for &lease in &self.cfg.leases {
            for fair in [false, true] {
                if fair || self.cfg.cohorts {
                    out.push(Action::PlainAcquire { c, lease, fair });
                }
            }
        }
    }

    /// The plain path's attempt: taken, or on to the script (undone first if fair requests
    /// queue).
    pub(crate) fn plain_acquire(
        &self,
        s: &mut State,
        ctx: &mut Ctx,
        c: Client,
        lease: Time,
        fair: bool,
    ) {
        s.procs[usize::from(c)].budget -= 1;
        let asked = self.server_lease(lease);
        match plain_take(&mut s.server, ctx, c, asked, fair) {
            Some((token, false)) => {
                s.procs[usize::from(c)].plain = Some(fair);
                self.took_plain(s, c, token, lease);
                return;
            }
            Some((token, true)) => {
                let claim = self.server_eviction();
                let done = plain_release(&mut s.server, ctx, (c, fair, token), None, claim);
                if let PlainReleased::Done { more } = done {
                    s.procs[usize::from(c)].grant_on |= more;
                }
            }
            None => {}
        }
        self.to_script(s, c, lease, fair);
    }

    /// Release the plain hold of `c` under `token` (its guard's fence: the last token handed
    /// out under it).
    pub(crate) fn release_plain(
        &self,
        s: &mut State,
        ctx: &mut Ctx,
        c: Client,
        token: u64,
        fair: bool,
        fence: u64,
    ) {
        // a cohort's leader knows the last token it handed out; else the whole block counts
        let last = if self.cfg.cohorts {
            fence
        } else {
            block_end(token)
        };
        let last = (last >= u64::from(s.now) * US_PER_TICK).then_some(last);
        let claim = self.server_eviction();
        match plain_release(&mut s.server, ctx, (c, fair, token), last, claim) {
            PlainReleased::Done { more } => s.procs[usize::from(c)].grant_on |= more,
            PlainReleased::Hash => {
                let done: Released = scripts::release(&mut s.server, ctx, c, token, claim);
                if done.acted_on.is_some_and(|t| t != token) {
                    s.ghost.touched_foreign = true;
                }
                s.procs[usize::from(c)].grant_on |= done.more;
            }
            PlainReleased::Lost => {}
        }
    }
}

/// The last token of the block of a plain hold's `token`.
fn block_end(token: u64) -> u64 {
    token + TOKEN_BLOCK - 1
}

impl LockModel {
    /// A request whose plain attempt did not take the lock goes on to its script (at once).
    fn to_script(&self, s: &mut State, c: Client, lease: Time, fair: bool) {
        let p = &mut s.procs[usize::from(c)];
        p.again = self.cfg.liveness;
        p.phase = if fair {
            let waiter = (c, p.next_wait);
            p.next_wait += 1;
            crate::state::Phase::Fair {
                lease,
                waiter,
                queued: false,
            }
        } else {
            crate::state::Phase::Exclusive {
                lease,
                recorded: false,
            }
        };
    }

    fn took_plain(&self, s: &mut State, c: Client, token: u64, lease: Time) {
        self.took(s, c, scripts::Acquired::Token(token), lease, true);
    }
}

/// The plain path's bounds: the main check's, with cohorts (whose leaders take the plain path
/// in exclusive mode), one lease (a lease of two ticks still runs out within the clock's
/// bound) and without the dead fair waiters.
pub fn plain_bounds() -> crate::model::Config {
    let mut cfg = crate::small();
    cfg.cohorts = true;
    cfg.plain = true;
    cfg.leases = vec![2];
    cfg.dead_queue = false;
    cfg
}

#[test]
fn the_plain_path_keeps_every_property() {
    crate::check_exhaustively(
        "plain path",
        LockModel {
            cfg: plain_bounds(),
        },
        crate::depth(),
    );
}
