//! The in-process backend: the same semantics as Redis (re-entry, leases, fencing, wake-ups, FIFO
//! grants) for one process, demos and tests. Expired leases are found when a lock is next touched.

mod fair;
mod force;
mod inspect;
mod shared;

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::{AcquireRequest, Attempt, LockParty, Released};
use crate::ids::{IdMap, OwnerId};
use crate::options::Mode;
use crate::saturating::later;
use crate::waiters::{LockId, WaitRegistry};

/// The current holder of a lock: who, how many times re-entered, under which token, until when.
#[derive(Debug)]
struct Holder {
    owner: Arc<str>,
    count: u32,
    token: u64,
    expires: Instant,
    /// One lock takes one mode: requests of the other are refused while it is held.
    mode: Mode,
    meta: HoldMeta,
    /// Made by a grant to a fair wait that no attempt has taken up: that wait's request may be
    /// taking it from its grant, and another request of the owner must not share it.
    granted: bool,
}

/// What `inspect` shows of a hold: when it began and the request it serves.
#[derive(Debug, Clone)]
pub(super) struct HoldMeta {
    pub(super) began: Instant,
    pub(super) request: Option<Arc<str>>,
}

impl HoldMeta {
    /// A hold beginning `now` for `request`.
    pub(super) fn new(now: Instant, request: Option<&str>) -> Self {
        HoldMeta {
            began: now,
            request: request.map(Arc::from),
        }
    }
}

#[derive(Debug, Default)]
struct Table {
    locks: IdMap<LockId, Holder>,
    /// Fair locks: waiters (`<owner>|<n>`, one per wait) in arrival order.
    queues: IdMap<LockId, VecDeque<Arc<str>>>,
    /// Read/write locks and semaphores: their holders and waiters.
    shared: IdMap<LockId, shared::SharedLock>,
    /// Sweep expired entries when the table grows past this size.
    sweep_at: usize,
}

impl Table {
    /// The live holder of `id`, forgetting an expired one.
    fn holder(&mut self, id: &LockId, now: Instant) -> Option<&mut Holder> {
        if self.locks.get(id).is_some_and(|h| h.expires <= now) {
            self.locks.remove(id);
        }
        self.locks.get_mut(id)
    }

    fn insert(&mut self, id: &LockId, held: Holder, now: Instant) {
        self.locks.insert(id.clone(), held);
        if self.locks.len() >= self.sweep_at {
            self.locks.retain(|_, h| h.expires > now);
            self.sweep_at = (self.locks.len() * 2).max(MIN_SWEEP);
        }
    }
}

/// Locks of one process, in memory.
#[derive(Debug)]
pub(crate) struct MemoryBackend {
    table: Mutex<Table>,
    /// One counter for every lock, floored by the clock: tokens rise strictly per lock without
    /// remembering idle locks, and across restarts of the process.
    last_token: AtomicU64,
    waiters: Arc<WaitRegistry>,
    /// The lease a fair grant starts with, until the new holder's manager extends it.
    claim: Duration,
    /// The label of this process, as lock states show it.
    label: Arc<str>,
}

const MIN_SWEEP: usize = 1024;

impl MemoryBackend {
    pub(crate) fn new(waiters: Arc<WaitRegistry>, claim: Duration, label: Arc<str>) -> Self {
        MemoryBackend {
            table: Mutex::new(Table {
                sweep_at: MIN_SWEEP,
                ..Table::default()
            }),
            last_token: AtomicU64::new(0),
            waiters,
            claim,
            label,
        }
    }

    fn table(&self) -> MutexGuard<'_, Table> {
        // Every operation below leaves the table consistent before it could panic.
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// One above the last token, and never below the system clock in microseconds: a process
    /// that restarts (a new backend) issues tokens above every one the earlier process issued,
    /// as long as the clock does not go back and tokens came less than once a microsecond.
    fn next_token(&self) -> u64 {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |since| {
                u64::try_from(since.as_micros()).unwrap_or(u64::MAX)
            });
        let mut last = self.last_token.load(Ordering::Relaxed);
        loop {
            let next = (last + 1).max(now);
            match self.last_token.compare_exchange_weak(
                last,
                next,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return next,
                Err(actual) => last = actual,
            }
        }
    }

    /// One attempt of an exclusive or fair request (shared modes: `shared_try_acquire`).
    pub(crate) fn try_acquire(&self, req: &AcquireRequest<'_>) -> Attempt {
        if req.mode.is_shared() {
            return self.shared_try_acquire(req);
        }
        let now = Instant::now();
        let mut table = self.table();
        if let Some(lock) = table.shared.get(req.id) {
            return Attempt::OtherMode { held: lock.family };
        }
        match lacked_hold(&mut table, req, now) {
            // a grant to another wait of the owner: busy for this request, as another's hold
            Some((true, expires)) => return self.wait_for_holder(&mut table, req, expires - now),
            // a hold of the owner that its guards do not have (its release is on its way): not
            // a re-entry; the attempt takes the lock afresh
            Some((false, _)) => drop(table.locks.remove(req.id)),
            None => {}
        }
        if let Some(held) = table.holder(req.id, now) {
            if held.mode == Mode::Fair && req.mode == Mode::Exclusive {
                // an exclusive request on a fair lock is a fair one (see `Mode::Exclusive`)
                return Attempt::OtherMode { held: Mode::Fair };
            }
            if *held.owner == **req.owner {
                // a queued fair request finding itself the holder found its grant, not a re-entry
                if !(req.queued && req.mode == Mode::Fair && held.mode == Mode::Fair) {
                    held.count += 1;
                } else {
                    held.granted = false;
                    if let Some(request) = req.request {
                        // its grant, taken up: the grant did not know what the wait was for
                        held.meta.request = Some(Arc::from(request));
                    }
                }
                held.expires = held.expires.max(later(now, req.lease));
                return Attempt::Acquired { token: held.token };
            }
            let ttl = held.expires - now;
            return self.wait_for_holder(&mut table, req, ttl);
        }
        if req.mode == Mode::Fair {
            if let Some(busy) = self.fair_free_lock(&mut table, req, now) {
                return busy;
            }
        } else if table.queues.contains_key(req.id) {
            // free, but fair requests are queued for it
            return Attempt::OtherMode { held: Mode::Fair };
        }
        let token = self.next_token();
        let held = Holder {
            owner: req.owner.as_arc().clone(),
            count: 1,
            token,
            expires: later(now, req.lease),
            mode: req.mode,
            meta: HoldMeta::new(now, req.request),
            granted: false,
        };
        table.insert(req.id, held, now);
        Attempt::Acquired { token }
    }

    pub(crate) fn release(
        &self,
        id: &LockId,
        owner: &OwnerId,
        mode: Mode,
        token: Option<u64>,
    ) -> Released {
        if mode.is_shared() {
            return self.shared_release(id, owner, token);
        }
        let now = Instant::now();
        let mut table = self.table();
        let Some(held) = table.holder(id, now) else {
            return Released::NotHeld;
        };
        if *held.owner != **owner || token.is_some_and(|t| t != held.token) {
            return Released::NotHeld;
        }
        if held.count > 1 {
            held.count -= 1;
            return Released::StillHeld;
        }
        table.locks.remove(id);
        if !self.grant_next(&mut table, id, now) {
            drop(table);
            self.waiters.wake_one(id);
        }
        Released::Freed
    }

    pub(crate) fn renew(&self, batch: &[LockParty], lease: Duration) -> Vec<bool> {
        let now = Instant::now();
        let mut table = self.table();
        batch
            .iter()
            .map(|lock| match table.holder(&lock.id, now) {
                Some(h) if h.owner == lock.owner => {
                    // only ever longer: another hold of the owner may have a longer lease
                    h.expires = h.expires.max(later(now, lease));
                    true
                }
                Some(_) => false,
                None => table.renew_shared(&lock.id, &lock.owner, now, later(now, lease)),
            })
            .collect()
    }
}

/// A hold of the request's owner that the request neither holds (its guards know another token,
/// or none) nor takes up (a queued fair request takes up a grant to its owner's wait): whether a
/// grant made it (that no attempt has taken up yet), and when it expires.
fn lacked_hold(
    table: &mut Table,
    req: &AcquireRequest<'_>,
    now: Instant,
) -> Option<(bool, Instant)> {
    let held = table.holder(req.id, now)?;
    let taking_up = req.queued && req.mode == Mode::Fair && held.mode == Mode::Fair;
    let lacked = *held.owner == **req.owner && !taking_up && req.held != Some(held.token);
    lacked.then_some((held.granted, held.expires))
}
