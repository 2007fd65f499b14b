//! The shared locks' scripts (shared_acquire.lua, shared_release.lua, shared_abandon.lua, the
//! shared parts of renew.lua, heartbeat.lua and grant_on.lua, and shared.lua's helpers), each one
//! atomic step on the model server, mirroring its script's decisions (names follow the Lua).

use crate::defects::Defects;
use crate::shared_state::{Entry, Family, Kind, SharedHash, SharedServer};
use crate::state::{Client, Time, Waiter, TOKEN_BLOCK, US_PER_TICK};

/// Waiters a grant looks at per call (MAX_LOOKED, scaled down from 1000; two, so that one call
/// can grant two reads).
pub const SHARED_LOOKED: u8 = 2;

/// What a script call sees besides the keys, and what it publishes.
pub struct SharedCtx<'a> {
    pub now: Time,
    pub defects: Defects,
    pub family: Family,
    /// Whether each manager is alive, and so subscribed to its inbox channel.
    pub alive: &'a [bool],
    /// Grants published: the manager, the wait and the token.
    pub out: Vec<(Client, Waiter, u64)>,
}

impl SharedCtx<'_> {
    fn listens(&self, manager: Client) -> bool {
        self.alive.get(usize::from(manager)) == Some(&true)
    }
}

/// A shared acquire script's answer: a token, or busy (`again`: try again at once), or
/// 'upgrade' (the owner holds a read and asks to write: refused).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SharedAnswer {
    Token(u64),
    Busy { again: bool },
    Upgrade,
}

fn reserve_token(s: &mut SharedServer, c: &SharedCtx) -> u64 {
    let now = u64::from(c.now) * US_PER_TICK;
    let last = s.fence.unwrap_or(0);
    let token = if last < now { now } else { last + 1 };
    s.fence = Some(token + TOKEN_BLOCK - 1);
    token
}

fn live_at_least(expires: &mut Option<Time>, until: Time) {
    if expires.is_none_or(|e| e < until) {
        *expires = Some(until);
    }
}

/// `live_at_least` of the hash and the holders' zset (a missing key stays missing).
fn keys_live_at_least(s: &mut SharedServer, c: &SharedCtx, ms: Time) {
    if let Some(h) = s.hash.as_mut() {
        live_at_least(&mut h.expires, c.now + ms);
    }
    if !s.holders.is_empty() {
        live_at_least(&mut s.holders_expires, c.now + ms);
    }
}

fn hash(s: &mut SharedServer) -> &mut SharedHash {
    // HSET on a missing key makes a hash without an expiry
    s.hash.get_or_insert_with(|| SharedHash {
        entries: Default::default(),
        writer: None,
        expires: None,
        restored: false,
    })
}

fn drop_shared(s: &mut SharedServer, owner: Client) {
    if let Some(h) = s.hash.as_mut() {
        h.entries.remove(&owner);
        if h.writer == Some(owner) {
            h.writer = None;
        }
    }
    s.holders.remove(&owner);
    if s.holders.is_empty() {
        s.holders_expires = None;
    }
}

fn purge(s: &mut SharedServer, c: &SharedCtx) {
    let gone: Vec<Client> = (s.holders.iter().filter(|(_, e)| **e <= c.now))
        .map(|(o, _)| *o)
        .collect();
    for owner in gone {
        drop_shared(s, owner);
    }
    let writer = s.hash.as_ref().and_then(|h| h.writer);
    if let Some(w) = writer.filter(|w| !s.holders.contains_key(w)) {
        drop_shared(s, w);
    }
}

fn live_hold(s: &mut SharedServer, owner: Client) -> bool {
    if s.holders.contains_key(&owner) {
        return true;
    }
    drop_shared(s, owner);
    false
}

pub(crate) fn has_room(s: &SharedServer, c: &SharedCtx, kind: Kind) -> bool {
    let count = s.holders.len();
    let writer = s.hash.as_ref().is_some_and(|h| h.writer.is_some());
    match (kind, c.family) {
        (Kind::Read, _) => !writer,
        (Kind::Write, _) if c.defects.write_beside_reads => !writer,
        (Kind::Write, _) => count == 0,
        (Kind::Permit, Family::Semaphore(n)) if c.defects.permit_over => count <= usize::from(n),
        (Kind::Permit, Family::Semaphore(n)) => count < usize::from(n),
        (Kind::Permit, Family::ReadWrite) => false,
    }
}

fn take_shared(s: &mut SharedServer, c: &SharedCtx, owner: Client, kind: Kind, ms: Time) -> u64 {
    let token = reserve_token(s, c);
    let h = hash(s);
    let grant = h.entries.get(&owner).and_then(|e| e.grant);
    let entry = Entry {
        count: 1,
        token,
        grant,
    };
    h.entries.insert(owner, entry);
    if kind == Kind::Write {
        h.writer = Some(owner);
    }
    s.holders.insert(owner, c.now + ms);
    keys_live_at_least(s, c, ms);
    token
}

/// grant_shared: the room goes to the waiters at the head of the queue, in order; a dead one is
/// dropped wherever it stands. The caller's token if it was granted, and whether the grant
/// stopped at its bound with waiters left. (Every manager the grant reaches listens: the model's
/// PUBLISH never reaches nobody, and no releaser's own waiter is granted, as a process that
/// releases has no other request.)
fn grant_shared(
    s: &mut SharedServer,
    c: &mut SharedCtx,
    claim: Time,
    caller: Option<Waiter>,
) -> (Option<u64>, bool) {
    let mut mine = None;
    for looked in 1..=SHARED_LOOKED + 1 {
        let Some(&(head, kind)) = s.queue.first() else {
            break;
        };
        if looked > SHARED_LOOKED {
            return (mine, true);
        }
        let alive = s.heartbeats.contains_key(&head) && (Some(head) == caller || c.listens(head.0));
        if alive && !has_room(s, c, kind) {
            break;
        }
        s.queue.remove(0);
        s.heartbeats.remove(&head);
        if alive {
            let token = take_shared(s, c, head.0, kind, claim);
            if Some(head) == caller {
                mine = Some(token);
            } else {
                let entry = hash(s).entries.get_mut(&head.0).expect("granted");
                entry.grant = Some(head);
                c.out.push((head.0, head, token));
            }
        }
    }
    (mine, false)
}

fn tidy_shared(s: &mut SharedServer) {
    if s.holders.is_empty() && s.queue.is_empty() {
        s.hash = None;
    }
}

fn join_queue(s: &mut SharedServer, c: &SharedCtx, w: (Waiter, Kind), eviction: Time, q: bool) {
    let beating = s.heartbeats.contains_key(&w.0);
    if !q || (!beating && !s.queue.contains(&w)) {
        s.queue.push(w);
    }
    s.heartbeats.insert(w.0, c.now + eviction);
    s.queue_expires = c.now + eviction;
}

/// The arguments of one shared_acquire.lua call.
pub struct Ask {
    pub owner: Client,
    pub lease: Time,
    pub queued: bool,
    pub eviction: Time,
    pub waiter: Waiter,
    pub kind: Kind,
    /// The token of the owner's hold its manager knows of.
    pub held: Option<u64>,
}

/// shared_acquire.lua, for a request that waits.
pub fn shared_acquire(s: &mut SharedServer, c: &mut SharedCtx, a: &Ask) -> SharedAnswer {
    purge(s, c);
    let entry = s
        .hash
        .as_ref()
        .and_then(|h| h.entries.get(&a.owner).cloned());
    let mut held = entry.clone();
    if entry
        .as_ref()
        .is_some_and(|e| e.grant.is_none() && Some(e.token) != a.held)
    {
        // a hold of the owner it does not have (restored by a restart) is no re-entry
        drop_shared(s, a.owner);
        held = None;
    }
    if let Some(e) = held.filter(|_| live_hold(s, a.owner)) {
        return reenter(s, c, a, e);
    }
    let mut head = s.queue.first().map(|(w, _)| *w);
    let mut more = false;
    if head.is_some() && head != Some(a.waiter) {
        let (mine, stopped) = grant_shared(s, c, a.eviction, Some(a.waiter));
        more = stopped;
        if let Some(token) = mine {
            s.holders.insert(a.owner, c.now + a.lease);
            keys_live_at_least(s, c, a.lease);
            return SharedAnswer::Token(token);
        }
        head = s.queue.first().map(|(w, _)| *w);
    }
    if (head.is_none() || head == Some(a.waiter)) && has_room(s, c, a.kind) {
        if head.is_some() {
            s.queue.remove(0);
            s.heartbeats.remove(&a.waiter);
        }
        return SharedAnswer::Token(take_shared(s, c, a.owner, a.kind, a.lease));
    }
    join_queue(s, c, (a.waiter, a.kind), a.eviction, a.queued);
    // the hash names the family while anyone waits, and lives as long as the wait (the
    // holders' zset keeps its own expiry)
    live_at_least(&mut hash(s).expires, c.now + a.eviction);
    SharedAnswer::Busy { again: more }
}

/// shared_acquire.lua's re-entry branch: a grant to a wait of the owner taken up, or a re-entry.
fn reenter(s: &mut SharedServer, c: &SharedCtx, a: &Ask, e: Entry) -> SharedAnswer {
    let expires = c.now + a.lease;
    if a.queued && e.grant.is_some() {
        let token = reserve_token(s, c);
        let entry = hash(s).entries.get_mut(&a.owner).expect("held");
        entry.token = token;
        entry.grant = None;
        s.holders.insert(a.owner, expires);
        keys_live_at_least(s, c, a.lease);
        return SharedAnswer::Token(token);
    }
    if a.kind == Kind::Write && s.hash.as_ref().and_then(|h| h.writer) != Some(a.owner) {
        return SharedAnswer::Upgrade;
    }
    if a.queued {
        s.queue.retain(|(w, _)| *w != a.waiter);
        s.heartbeats.remove(&a.waiter);
    }
    hash(s).entries.get_mut(&a.owner).expect("held").count += 1;
    let until = s.holders.entry(a.owner).or_insert(expires);
    *until = (*until).max(expires);
    keys_live_at_least(s, c, a.lease);
    SharedAnswer::Token(e.token)
}

/// shared_release.lua, bound by `token`: the hold it ended (if any), and 'more'.
pub fn shared_release(
    s: &mut SharedServer,
    c: &mut SharedCtx,
    owner: Client,
    token: u64,
    claim: Time,
) -> (Option<u64>, bool) {
    purge(s, c);
    let entry = s.hash.as_ref().and_then(|h| h.entries.get(&owner).cloned());
    let Some(e) = entry.filter(|e| e.token == token) else {
        return (None, false);
    };
    if !live_hold(s, owner) {
        return (None, false);
    }
    if e.count > 1 {
        hash(s).entries.get_mut(&owner).expect("held").count -= 1;
        return (Some(e.token), false);
    }
    drop_shared(s, owner);
    let (_, more) = grant_shared(s, c, claim, None);
    tidy_shared(s);
    (Some(e.token), more)
}

/// shared_abandon.lua: the wait leaves the queue; an unused grant to it is dropped; the room
/// goes on. Whether the grant stopped at its bound.
pub fn shared_abandon(
    s: &mut SharedServer,
    c: &mut SharedCtx,
    owner: Client,
    waiter: Waiter,
    claim: Time,
) -> bool {
    s.queue.retain(|(w, _)| *w != waiter);
    s.heartbeats.remove(&waiter);
    let Some(h) = s.hash.as_mut() else {
        return false;
    };
    if let Some(e) = h
        .entries
        .get_mut(&owner)
        .filter(|e| e.grant == Some(waiter))
    {
        e.grant = None;
        if e.count == 1 {
            drop_shared(s, owner);
        } else {
            e.count -= 1;
        }
    }
    purge(s, c);
    let (_, more) = grant_shared(s, c, claim, None);
    tidy_shared(s);
    more
}

/// renew.lua for a shared hold (its owner id, made for this one hold, stands as owner and
/// token): lengthen a lease that has not run out. Whether it was still held.
pub fn shared_renew(
    s: &mut SharedServer,
    c: &SharedCtx,
    owner: Client,
    token: u64,
    ms: Time,
) -> bool {
    let held = s.hash.as_ref().and_then(|h| h.entries.get(&owner));
    if held.is_none_or(|e| e.token != token) {
        return false;
    }
    match s.holders.get_mut(&owner) {
        Some(until) if *until > c.now => {
            *until = (*until).max(c.now + ms);
            keys_live_at_least(s, c, ms);
            true
        }
        _ => false,
    }
}

/// heartbeat.lua for one shared waiter.
pub fn shared_heartbeat(s: &mut SharedServer, c: &SharedCtx, waiter: Waiter, eviction: Time) {
    if let Some(e) = s.heartbeats.get_mut(&waiter) {
        *e = c.now + eviction;
        s.queue_expires = c.now + eviction;
        if let Some(h) = s.hash.as_mut() {
            live_at_least(&mut h.expires, c.now + eviction);
        }
    }
}

/// grant_on.lua for a shared lock: carry on a grant stopped at its bound.
pub fn shared_grant_on(s: &mut SharedServer, c: &mut SharedCtx, claim: Time) -> bool {
    if s.hash.is_none() {
        return false;
    }
    purge(s, c);
    let (_, more) = grant_shared(s, c, claim, None);
    tidy_shared(s);
    more
}

/// The confirmation a read group asks for (HEXISTS of the hold's owner id).
pub fn holds(s: &SharedServer, owner: Client, token: u64) -> bool {
    let held = s.hash.as_ref().and_then(|h| h.entries.get(&owner));
    held.is_some_and(|e| e.token == token)
}
