//! The fair scripts (fair_acquire.lua, fair_abandon.lua, grant_on.lua, heartbeat.lua), each
//! one atomic step on the model server, mirroring its script's decisions.

use crate::scripts::{
    grant_next, join_queue, mark, next_token, reenter, retire_block, take, wake_recorded, Acquired,
    Ctx,
};
use crate::state::{Client, FairMark, LockHash, Server, Time, Waiter, TOKEN_BLOCK};

/// fair_acquire.lua's answer when not acquired: busy, or "try again at once".
fn busy_or_again(more: bool) -> Acquired {
    if more {
        Acquired::Fair
    } else {
        Acquired::Busy
    }
}

/// fair_acquire.lua. `held`: the token of the owner's hold its guards have, and whether that
/// hold is a plain lock. Answers `Fair` for "-1: try again at once".
#[allow(clippy::too_many_arguments)]
pub fn fair_acquire(
    s: &mut Server,
    c: &mut Ctx,
    owner: Client,
    lease: Time,
    will_wait: bool,
    queued: bool,
    eviction: Time,
    waiter: Waiter,
    (held, held_plain): (Option<u64>, bool),
) -> Acquired {
    let free = s.lock.is_none() && s.plain.is_none();
    if free && s.queue.is_empty() && s.waiters.is_empty() {
        if queued {
            s.heartbeats.remove(&waiter);
        }
        let token = next_token(s, c, 0);
        take(s, c, owner, lease, token, Some(FairMark::Any));
        return Acquired::Token(token);
    }
    if let Some(answer) = plain_held(
        s,
        c,
        (owner, waiter),
        (will_wait, queued),
        eviction,
        (held, held_plain),
    ) {
        return answer;
    }
    if let Some(answer) = held_by_owner(s, c, (owner, waiter), lease, queued, held) {
        return answer;
    }
    let (token, marked, fair) = match &s.lock {
        Some(l) => (l.token, l.marked, l.fair.clone()),
        None => (None, false, None),
    };
    let mut more = false;
    if token.is_none() {
        match free_but_waited(s, c, (owner, waiter), lease, eviction) {
            Ok(answer) => return answer,
            Err(stopped) => more = stopped,
        }
    }
    if !will_wait {
        return busy_or_again(more);
    }
    join_queue(s, c, waiter, eviction, queued);
    if (token.is_some() || c.defects.mark_missing) && !marked {
        // HSET on a missing key makes a hash without an expiry
        let l = s.lock.get_or_insert_with(|| LockHash {
            holds: Default::default(),
            token: None,
            marked: false,
            fair: None,
            expires: None,
            restored: false,
            granted: None,
        });
        l.marked = true;
    }
    if token.is_some() && fair.is_none() {
        wake_recorded(s, c);
    }
    busy_or_again(more)
}

/// fair_abandon.lua: the wait leaves the queue; an unused grant to it is dropped and passed on.
/// Whether a grant it passed on stopped at its bound.
pub fn fair_abandon(
    s: &mut Server,
    c: &mut Ctx,
    owner: Client,
    waiter: Waiter,
    claim: Time,
) -> bool {
    s.queue.retain(|w| *w != waiter);
    s.heartbeats.remove(&waiter);
    let Some(l) = s
        .lock
        .as_mut()
        .filter(|l| l.fair == Some(FairMark::Wait(waiter)))
    else {
        return false;
    };
    l.fair = Some(FairMark::Any);
    if l.holds.get(&owner) == Some(&1) {
        let held = l.token.expect("held");
        s.lock = None;
        retire_block(s, c, held);
        return grant_next(s, c, claim, None).1;
    }
    if let Some(h) = l.holds.get_mut(&owner) {
        *h -= 1;
    }
    false
}

/// grant_on.lua for an exclusive or fair lock: carry on a grant stopped at its bound.
pub fn grant_on(s: &mut Server, c: &mut Ctx, claim: Time) -> bool {
    s.lock.is_none() && s.plain.is_none() && grant_next(s, c, claim, None).1
}

/// heartbeat.lua for one waiter: push its heartbeat key and its queue's expiry back.
pub fn heartbeat(s: &mut Server, c: &Ctx, waiter: Waiter, eviction: Time) {
    if let Some(e) = s.heartbeats.get_mut(&waiter) {
        *e = c.now + eviction;
        s.queue_expires = c.now + eviction;
    }
}

/// fair_acquire.lua on a plain lock: the owner's own is made a hash (a re-entry, which goes on
/// as one), a stale one of the owner goes, and another's is waited for (the answer).
fn plain_held(
    s: &mut Server,
    c: &mut Ctx,
    (owner, waiter): (Client, Waiter),
    (will_wait, queued): (bool, bool),
    eviction: Time,
    (held, held_plain): (Option<u64>, bool),
) -> Option<Acquired> {
    let p = s.plain.clone()?;
    if p.owner == owner && held_plain && held == Some(p.hold) {
        // the owner's own plain lock: a re-entry, which makes it a hash
        crate::plain::unplain(s, &p);
    } else if p.owner == owner {
        // a plain hold of the owner it does not have: only its holder knew its token, and the
        // clock passed it
        s.plain = None;
    } else {
        if will_wait {
            join_queue(s, c, waiter, eviction, queued);
            if !p.fair {
                wake_recorded(s, c);
            }
        }
        return Some(Acquired::Busy);
    }
    None
}

/// fair_acquire.lua when the owner holds the lock: a grant to its wait taken up (a new token),
/// or a re-entry; a hold of the owner its guards do not have goes first.
fn held_by_owner(
    s: &mut Server,
    c: &mut Ctx,
    (owner, waiter): (Client, Waiter),
    lease: Time,
    queued: bool,
    held: Option<u64>,
) -> Option<Acquired> {
    let granted = s
        .lock
        .as_ref()
        .is_some_and(|l| matches!(l.fair, Some(FairMark::Wait(w)) if w.0 == owner));
    if let Some(l) = &s.lock {
        if l.holds.contains_key(&owner) && !granted && l.token != held {
            let token = l.token.expect("held");
            retire_block(s, c, token);
            s.lock = None;
        }
    }
    let held_token = s
        .lock
        .as_ref()
        .filter(|l| l.holds.contains_key(&owner))
        .and_then(|l| l.token)
        // a grant to a wait of the owner that this request is not and does not hold: busy
        .filter(|&token| !(granted && !queued && Some(token) != held) || c.defects.share_grant);
    if let Some(held_token) = held_token {
        if queued && granted {
            let token = next_token(s, c, held_token + TOKEN_BLOCK);
            let l = s.lock.as_mut().expect("held");
            l.token = Some(token);
            l.fair = Some(FairMark::Any);
            l.expires = Some(c.now + lease);
            return Some(Acquired::Token(token));
        }
        if queued {
            s.queue.retain(|w| *w != waiter);
            s.heartbeats.remove(&waiter);
        }
        return Some(Acquired::Token(reenter(s, c, owner, lease)));
    }
    None
}

/// fair_acquire.lua on a free lock others wait for: the head of the queue gets it (this wait, if
/// the ones ahead were dead). `Err`: not this wait's; whether the grant stopped at its bound.
fn free_but_waited(
    s: &mut Server,
    c: &mut Ctx,
    (owner, waiter): (Client, Waiter),
    lease: Time,
    eviction: Time,
) -> Result<Acquired, bool> {
    let mut more = false;
    wake_recorded(s, c);
    let mut head = s.queue.first().copied();
    let mut ours = head.is_none() || head == Some(waiter);
    if !ours {
        let (granted, stopped) = grant_next(s, c, eviction, Some(waiter));
        more = stopped;
        if granted == Some(waiter) {
            let l = s.lock.as_mut().expect("granted");
            l.expires = Some(c.now + lease);
            return Ok(Acquired::Token(l.token.expect("granted")));
        } else if granted.is_none() {
            head = s.queue.first().copied();
            ours = head.is_none() || head == Some(waiter);
        }
    }
    if ours {
        s.heartbeats.remove(&waiter);
        let token = next_token(s, c, 0);
        let was_marked = s.lock.as_ref().is_some_and(|l| l.marked);
        take(s, c, owner, lease, token, Some(FairMark::Any));
        if head.is_some() {
            s.queue.remove(0);
        }
        if head.is_some() || was_marked {
            mark(s);
        }
        return Ok(Acquired::Token(token));
    }
    Err(more)
}
