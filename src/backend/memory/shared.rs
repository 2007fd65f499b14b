//! Shared locks in memory (read/write locks and semaphores): the holders of each lock, each with
//! its own count, token and lease, and a queue of waiters granted in order as room opens.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{MemoryBackend, Table};
use crate::backend::{owner_of, shared_kind, shared_kind_of, AcquireRequest, Attempt, Released};
use crate::options::Mode;
use crate::saturating::later;
use crate::waiters::LockId;

/// One shared lock: its family (`Mode::Write` for read/write locks, `Mode::Semaphore(n)`), its
/// holders by owner, and its waiters (`<owner>|<n>|<kind>`) in order of arrival.
#[derive(Debug)]
pub(super) struct SharedLock {
    pub(super) family: Mode,
    pub(super) holds: HashMap<Arc<str>, SharedHold>,
    pub(super) queue: VecDeque<Arc<str>>,
}

/// One owner's hold of a shared lock.
#[derive(Debug)]
pub(super) struct SharedHold {
    pub(super) count: u32,
    pub(super) token: u64,
    pub(super) expires: Instant,
    pub(super) write: bool,
    /// The wait it was granted to, until that wait takes it up.
    granted_to: Option<Arc<str>>,
    pub(super) meta: super::HoldMeta,
}

/// The family a request of `mode` shares a lock with: read and write are one.
pub(super) fn family_of(mode: Mode) -> Mode {
    match mode {
        Mode::Read => Mode::Write,
        other => other,
    }
}

impl SharedLock {
    fn new(family: Mode) -> Self {
        SharedLock {
            family,
            holds: HashMap::new(),
            queue: VecDeque::new(),
        }
    }

    fn purge(&mut self, now: Instant) {
        self.holds.retain(|_, hold| hold.expires > now);
    }

    /// Whether a hold of `kind` fits beside the holders.
    fn has_room(&self, kind: char) -> bool {
        match (kind, self.family) {
            ('r', _) => !self.holds.values().any(|hold| hold.write),
            ('w', _) => self.holds.is_empty(),
            (_, Mode::Semaphore(n)) => self.holds.len() < n as usize,
            _ => false,
        }
    }

    pub(super) fn is_idle(&self) -> bool {
        self.holds.is_empty() && self.queue.is_empty()
    }

    /// How long until the first holder's lease runs out (`claim` when nobody holds it).
    fn ttl(&self, now: Instant, claim: Duration) -> Duration {
        (self.holds.values().map(|hold| hold.expires - now).min()).unwrap_or(claim)
    }

    /// Drop every live hold; returns their tokens.
    pub(super) fn force_release(&mut self, now: Instant) -> Vec<u64> {
        self.purge(now);
        self.holds.drain().map(|(_, hold)| hold.token).collect()
    }

    fn dequeue(&mut self, waiter: &str) {
        self.queue.retain(|queued| **queued != *waiter);
    }
}

impl MemoryBackend {
    pub(super) fn shared_try_acquire(&self, req: &AcquireRequest<'_>) -> Attempt {
        let now = Instant::now();
        let mut table = self.table();
        if let Some(held) = table.holder(req.id, now) {
            return Attempt::OtherMode { held: held.mode };
        }
        if table.queues.contains_key(req.id) {
            return Attempt::OtherMode { held: Mode::Fair };
        }
        let family = family_of(req.mode);
        let lock = (table.shared.entry(req.id.clone())).or_insert_with(|| SharedLock::new(family));
        if lock.family != family {
            return Attempt::OtherMode { held: lock.family };
        }
        lock.purge(now);
        let attempt = self.shared_attempt(lock, req, now);
        if lock.is_idle() {
            table.shared.remove(req.id);
        }
        attempt
    }

    fn shared_attempt(
        &self,
        lock: &mut SharedLock,
        req: &AcquireRequest<'_>,
        now: Instant,
    ) -> Attempt {
        let kind = shared_kind_of(req.mode).unwrap_or('n');
        let owner: &str = req.owner;
        let stale = (lock.holds.get(owner))
            .is_some_and(|hold| hold.granted_to.is_none() && req.held != Some(hold.token));
        if stale {
            // a hold of the owner that its guards do not have (its release is on its way): not
            // a re-entry; the attempt takes the lock afresh
            lock.holds.remove(owner);
        }
        if let Some(hold) = lock.holds.get_mut(owner) {
            if req.queued && hold.granted_to.take().is_some() {
                // a grant to a wait of this owner: ours, as a new hold
                hold.token = self.next_token();
            } else if kind == 'w' && !hold.write {
                return Attempt::NoUpgrade;
            } else {
                hold.count += 1;
            }
            hold.expires = hold.expires.max(later(now, req.lease));
            let token = hold.token;
            lock.dequeue(req.waiter);
            return Attempt::Acquired { token };
        }
        if lock.queue.front().is_some_and(|head| **head != *req.waiter) {
            if let Some(token) = self.grant_shared(lock, req.id, now, Some(req.waiter)) {
                if let Some(hold) = lock.holds.get_mut(owner) {
                    hold.expires = later(now, req.lease);
                }
                return Attempt::Acquired { token };
            }
        }
        let first = lock.queue.front().is_none_or(|head| **head == *req.waiter);
        if first && lock.has_room(kind) {
            lock.dequeue(req.waiter);
            let meta = super::HoldMeta::new(now, req.request);
            let token = self.take_shared(lock, owner, kind, later(now, req.lease), None, meta);
            return Attempt::Acquired { token };
        }
        if req.will_wait && !lock.queue.iter().any(|w| **w == *req.waiter) {
            lock.queue.push_back(Arc::from(req.waiter));
        }
        Attempt::Busy {
            ttl: Some(lock.ttl(now, self.claim)),
        }
    }

    /// Make `owner` a holder of kind `kind` until `expires`, under a new token.
    fn take_shared(
        &self,
        lock: &mut SharedLock,
        owner: &str,
        kind: char,
        expires: Instant,
        granted_to: Option<Arc<str>>,
        meta: super::HoldMeta,
    ) -> u64 {
        let token = self.next_token();
        let hold = SharedHold {
            count: 1,
            token,
            expires,
            write: kind == 'w',
            granted_to,
            meta,
        };
        lock.holds.insert(Arc::from(owner), hold);
        token
    }

    /// Grant the room of `lock` to the waiters at the head of its queue, in order, each under the
    /// claim lease. `caller` (a waiter running an attempt) is not told: the returned token is its
    /// grant, if it got one.
    pub(super) fn grant_shared(
        &self,
        lock: &mut SharedLock,
        id: &LockId,
        now: Instant,
        caller: Option<&str>,
    ) -> Option<u64> {
        let mut mine = None;
        while let Some(head) = lock.queue.front().cloned() {
            let kind = shared_kind(&head).unwrap_or('n');
            if !lock.has_room(kind) {
                break;
            }
            lock.queue.pop_front();
            let owner = owner_of(&head);
            if caller == Some(&*head) {
                let meta = super::HoldMeta::new(now, None);
                mine = Some(self.take_shared(lock, owner, kind, now + self.claim, None, meta));
                continue;
            }
            let (meta, granted) = (super::HoldMeta::new(now, None), Some(head.clone()));
            let token = self.take_shared(lock, owner, kind, now + self.claim, granted, meta);
            if !self.waiters.grant(id, &head, token) {
                lock.holds.remove(owner);
            }
        }
        mine
    }

    pub(super) fn shared_release(&self, id: &LockId, owner: &str, token: Option<u64>) -> Released {
        let now = Instant::now();
        let mut table = self.table();
        let Some(lock) = table.shared.get_mut(id) else {
            return Released::NotHeld;
        };
        lock.purge(now);
        let released = match lock.holds.get_mut(owner) {
            Some(hold) if token.is_none_or(|t| t == hold.token) => {
                hold.count -= 1;
                if hold.count > 0 {
                    return Released::StillHeld;
                }
                lock.holds.remove(owner);
                self.grant_shared(lock, id, now, None);
                Released::Freed
            }
            _ => Released::NotHeld,
        };
        if lock.is_idle() {
            table.shared.remove(id);
        }
        released
    }

    /// `waiter` left the queue of `id`: drop a grant made to it under `grant` that it never took
    /// up, and grant whatever room there is (a write at the head may have held back reads).
    pub(super) fn shared_leave_queue(&self, id: &LockId, waiter: &str, grant: Option<u64>) {
        let now = Instant::now();
        let mut table = self.table();
        let Some(lock) = table.shared.get_mut(id) else {
            return;
        };
        lock.dequeue(waiter);
        let owner = owner_of(waiter);
        let unused = lock.holds.get(owner).is_some_and(|hold| {
            hold.granted_to.as_deref() == Some(waiter) && Some(hold.token) == grant
        });
        if unused {
            if let Some(hold) = lock.holds.get_mut(owner) {
                hold.count -= 1;
                hold.granted_to = None;
                if hold.count == 0 {
                    lock.holds.remove(owner);
                }
            }
        }
        lock.purge(now);
        self.grant_shared(lock, id, now, None);
        if lock.is_idle() {
            table.shared.remove(id);
        }
    }
}

impl Table {
    /// Renew `owner`'s hold of the shared lock `id` to `until`; false when it holds none.
    pub(super) fn renew_shared(
        &mut self,
        id: &LockId,
        owner: &str,
        now: Instant,
        until: Instant,
    ) -> bool {
        let hold = (self.shared.get_mut(id)).and_then(|lock| lock.holds.get_mut(owner));
        match hold {
            Some(hold) if hold.expires > now => {
                hold.expires = hold.expires.max(until);
                true
            }
            _ => false,
        }
    }

    /// Whether `waiter` is queued for the shared lock `id` behind live holders (else it should
    /// check again: a holder's lease ran out).
    pub(super) fn waits_for_shared(&self, id: &LockId, waiter: &str, now: Instant) -> bool {
        self.shared.get(id).is_some_and(|lock| {
            lock.queue.iter().any(|queued| **queued == *waiter)
                && !lock.holds.is_empty()
                && lock.holds.values().all(|hold| hold.expires > now)
        })
    }
}
