//! The scripts of src/backend/redis/*.lua, each one atomic step on the model server. Each
//! mirrors its script's decisions line by line (names follow the Lua), for one lock, with the
//! seeded defects of `defects.rs` as switches.

use crate::defects::Defects;
use crate::state::{
    Client, FairMark, LockHash, Msg, Server, Time, Waiter, MAX_LOOKED, TOKEN_BLOCK, US_PER_TICK,
};

/// What a script call sees besides the keys: the clock, the defects, who listens, what it
/// publishes.
pub struct Ctx<'a> {
    pub now: Time,
    pub defects: Defects,
    /// Whether each manager is alive, and so subscribed to its inbox channel.
    pub alive: &'a [bool],
    /// Messages published (to a manager that listens).
    pub out: Vec<(Client, Msg)>,
}

impl Ctx<'_> {
    fn now_us(&self) -> u64 {
        u64::from(self.now) * US_PER_TICK
    }

    fn listens(&self, manager: Client) -> bool {
        self.alive
            .get(usize::from(manager))
            .copied()
            .unwrap_or(false)
    }

    fn publish(&mut self, manager: Client, msg: Msg) -> bool {
        let heard = self.listens(manager);
        if heard {
            self.out.push((manager, msg));
        }
        heard
    }
}

/// An acquire script's answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Acquired {
    Token(u64),
    /// Busy; the request waits (or not) as it asked.
    Busy,
    /// Held or queued for in fair mode: the request waits in the fair queue.
    Fair,
}

pub(crate) fn next_token(s: &Server, c: &Ctx, floor: u64) -> u64 {
    let counted = s.fence.unwrap_or(0) + 1;
    let token = if c.defects.no_clock_floor {
        counted
    } else {
        counted.max(c.now_us())
    };
    token.max(floor)
}

pub(crate) fn retire_block(s: &mut Server, c: &Ctx, token: u64) {
    let last = token + TOKEN_BLOCK - 1;
    if last >= c.now_us() && last > s.fence.unwrap_or(0) {
        s.fence = Some(last);
    }
}

pub(crate) fn take(
    s: &mut Server,
    c: &Ctx,
    owner: Client,
    lease: Time,
    token: u64,
    fair: Option<FairMark>,
) {
    s.lock = Some(LockHash {
        holds: [(owner, 1)].into(),
        token: Some(token),
        marked: false,
        fair,
        expires: Some(c.now + lease),
        restored: false,
        granted: None,
    });
}

pub(crate) fn mark(s: &mut Server) {
    if let Some(l) = s.lock.as_mut() {
        l.marked = true;
    }
}

pub(crate) fn reenter(s: &mut Server, c: &Ctx, owner: Client, lease: Time) -> u64 {
    let l = s.lock.as_mut().expect("re-entry of a held lock");
    *l.holds.entry(owner).or_insert(0) += 1;
    let until = c.now + lease;
    if l.expires.is_some_and(|e| e < until) {
        l.expires = Some(until);
    }
    l.token.expect("a held lock has a token")
}

fn live_at_least(expires: &mut Time, until: Time) {
    if *expires < until {
        *expires = until;
    }
}

/// acquire.lua (exclusive). `wait`: 0 '', 1 'w', 2 'wr'; `held`: the token of the owner's hold
/// that its guards have.
pub fn acquire(
    s: &mut Server,
    c: &Ctx,
    owner: Client,
    lease: Time,
    wait: u8,
    held: Option<u64>,
) -> Acquired {
    if s.plain.is_some() {
        return plain_held(s, c, owner, lease, wait);
    }
    // read before a stale hold ends below: its mark stays with the lock
    let marked = s.lock.as_ref().is_some_and(|l| l.marked);
    if let Some(l) = &s.lock {
        if l.fair.is_some() {
            return Acquired::Fair;
        }
        let stale = l.holds.contains_key(&owner) && l.token != held;
        if stale && !c.defects.reenter_restored {
            let token = l.token.expect("held");
            s.lock = None;
            retire_block(s, c, token);
        } else if l.holds.contains_key(&owner) {
            return Acquired::Token(reenter(s, c, owner, lease));
        }
    }
    if s.lock.as_ref().is_none_or(|l| l.token.is_none()) {
        if !s.queue.is_empty() {
            return Acquired::Fair;
        }
        let token = next_token(s, c, 0);
        take(s, c, owner, lease, token, None);
        if wait == 2 || marked {
            mark(s);
        }
        if wait == 2 {
            s.waiters.retain(|m| *m != owner);
        }
        return Acquired::Token(token);
    }
    if wait != 0 {
        if !s.queue.is_empty() {
            return Acquired::Fair;
        }
        let ttl_end = s.lock.as_ref().and_then(|l| l.expires).unwrap_or(c.now);
        if s.waiters.is_empty() {
            // no record: the key is gone with its expiry (PTTL -2), and the record made now
            // gets the new one, however short
            s.waiters_expires = c.now;
        }
        if !s.waiters.contains(&owner) {
            s.waiters.push(owner);
        }
        live_at_least(&mut s.waiters_expires, ttl_end + lease + 1);
        mark(s);
    }
    Acquired::Busy
}

/// How much longer than its claim the seeded defect `long_claim` keeps a grant.
const LONG_CLAIM: Time = 2;

/// grant_next of common.lua: the first live waiter gets the free lock with a claim lease.
/// Returns the waiter granted, and whether it stopped at its bound with waiters left.
pub fn grant_next(
    s: &mut Server,
    c: &mut Ctx,
    claim: Time,
    caller: Option<Waiter>,
) -> (Option<Waiter>, bool) {
    let mut budget = MAX_LOOKED;
    while budget > 0 {
        budget -= 1;
        if s.queue.is_empty() {
            return (None, false);
        }
        let head = s.queue.remove(0);
        let alive = s.heartbeats.remove(&head).is_some();
        if alive && (Some(head) == caller || c.listens(head.0)) {
            let token = next_token(s, c, 0);
            if Some(head) == caller {
                take(s, c, head.0, claim, token, Some(FairMark::Any));
                mark(s);
                return (Some(head), false);
            }
            let name = if c.defects.grant_unnamed {
                FairMark::Any
            } else {
                FairMark::Wait(head)
            };
            let claim = if c.defects.long_claim {
                claim + LONG_CLAIM
            } else {
                claim
            };
            take(s, c, head.0, claim, token, Some(name));
            mark(s);
            if let Some(l) = s.lock.as_mut() {
                l.granted = Some(c.now);
            }
            // a manager that listened a moment ago still does: the grant is never undone here
            c.publish(head.0, Msg::Grant(head, token));
            return (Some(head), false);
        }
    }
    (None, !s.queue.is_empty())
}

pub(crate) fn wake_recorded(s: &mut Server, c: &mut Ctx) {
    for m in std::mem::take(&mut s.waiters) {
        c.publish(m, Msg::Free);
    }
}

pub(crate) fn join_queue(s: &mut Server, c: &Ctx, waiter: Waiter, eviction: Time, queued: bool) {
    let beating = s.heartbeats.contains_key(&waiter);
    if !queued || (!beating && !s.queue.contains(&waiter)) {
        s.queue.push(waiter);
    }
    s.heartbeats.insert(waiter, c.now + eviction);
    s.queue_expires = c.now + eviction;
}

pub(crate) fn notify_next(s: &mut Server, c: &mut Ctx) {
    while !s.waiters.is_empty() {
        let head = s.waiters.remove(0);
        if c.publish(head, Msg::Free) {
            return;
        }
    }
}

/// What a release did: the token of the hold it changed (if any), and whether its grant
/// stopped at its bound ('more': the manager owes a `grant_on`).
pub struct Released {
    pub acted_on: Option<u64>,
    pub more: bool,
}

/// release.lua, bound by `token` (unless the defect binds it by owner alone).
pub fn release(s: &mut Server, c: &mut Ctx, owner: Client, token: u64, claim: Time) -> Released {
    let none = Released {
        acted_on: None,
        more: false,
    };
    let Some(l) = s.lock.as_mut() else {
        return none;
    };
    if !c.defects.release_by_owner && l.token != Some(token) {
        return none;
    }
    let Some(holds) = l.holds.get_mut(&owner) else {
        return none;
    };
    let acted_on = l.token;
    if *holds > 1 {
        *holds -= 1;
        return Released {
            acted_on,
            more: false,
        };
    }
    let (marked, held) = (l.marked, l.token.expect("held"));
    s.lock = None;
    retire_block(s, c, held);
    if c.defects.release_silent || !marked || (s.waiters.is_empty() && s.queue.is_empty()) {
        return Released {
            acted_on,
            more: false,
        };
    }
    let (granted, more) = grant_next(s, c, claim, None);
    if granted.is_none() {
        notify_next(s, c);
    }
    Released { acted_on, more }
}

/// renew.lua for one lock: by owner, and only ever lengthening (PEXPIRE GT) unless the defect
/// drops GT. Whether the owner still held it.
pub fn renew(s: &mut Server, c: &Ctx, owner: Client, lease: Time) -> bool {
    let Some(l) = s.lock.as_mut().filter(|l| l.holds.contains_key(&owner)) else {
        return false;
    };
    let until = c.now + lease;
    if c.defects.renew_without_gt || l.expires.is_some_and(|e| e < until) {
        l.expires = Some(until);
    }
    true
}

/// abandon.lua: `manager` stops waiting in exclusive mode; `pass_on`: it read a wake-up nobody
/// here can use.
pub fn abandon(s: &mut Server, c: &mut Ctx, manager: Client, pass_on: bool) {
    s.waiters.retain(|m| *m != manager);
    if pass_on {
        if s.lock.is_none() && s.plain.is_none() {
            notify_next(s, c);
        } else {
            mark(s);
        }
    }
}

/// acquire.lua on a plain lock: held (the owner's own too, which only a cohort's leader takes,
/// and re-enters in memory); a waiting request is recorded, and not marked: a plain release
/// looks for waiters itself.
fn plain_held(s: &mut Server, c: &Ctx, owner: Client, lease: Time, wait: u8) -> Acquired {
    let Some(p) = &s.plain else {
        return Acquired::Busy;
    };
    if p.fair || (wait != 0 && !s.queue.is_empty()) {
        return Acquired::Fair;
    }
    if wait != 0 {
        let ttl_end = p.expires;
        if s.waiters.is_empty() {
            // no record: made now, with the new expiry however short (as for a hash)
            s.waiters_expires = c.now;
        }
        if !s.waiters.contains(&owner) {
            s.waiters.push(owner);
        }
        live_at_least(&mut s.waiters_expires, ttl_end + lease + 1);
    }
    Acquired::Busy
}
