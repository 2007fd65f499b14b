//! Fair (FIFO) locks in memory: a queue of waiters (`<owner>|<n>`, one per wait) per lock; a
//! release grants the lock to the head of the queue directly. Waiters cannot die without their
//! process here, so nobody is evicted.

use std::sync::Arc;
use std::time::Instant;

use super::{Holder, MemoryBackend, Table};
use crate::backend::{owner_of, shared_kind, AcquireRequest, Attempt, LockParty};
use crate::options::Mode;
use crate::saturating::later;
use crate::waiters::LockId;

/// Leave the queue of `id`; an emptied queue goes, so that locks waited for once leave nothing.
fn dequeue(table: &mut Table, id: &LockId, waiter: &str) {
    if let Some(queue) = table.queues.get_mut(id) {
        queue.retain(|w| **w != *waiter);
        if queue.is_empty() {
            table.queues.remove(id);
        }
    }
}

/// Join the queue of `id` (once).
pub(super) fn enqueue(table: &mut Table, id: &LockId, waiter: &str) {
    let queue = table.queues.entry(id.clone()).or_default();
    if !queue.iter().any(|w| **w == *waiter) {
        queue.push_back(Arc::from(waiter));
    }
}

impl MemoryBackend {
    /// The lock is held by another owner, for `ttl` more. A fair request queues (behind a holder
    /// of either mode: a lock held in exclusive mode grants itself to the queue when it frees);
    /// an exclusive one finding a queue waits in it too, as a fair request.
    pub(super) fn wait_for_holder(
        &self,
        table: &mut Table,
        req: &AcquireRequest<'_>,
        ttl: std::time::Duration,
    ) -> Attempt {
        if req.will_wait && req.mode == Mode::Exclusive && table.queues.contains_key(req.id) {
            return Attempt::OtherMode { held: Mode::Fair };
        }
        if req.will_wait && req.mode == Mode::Fair {
            enqueue(table, req.id, req.waiter);
            // requests of exclusive mode would sleep through the grants to the queue
            self.waiters.wake_unqueued(req.id);
        }
        Attempt::Busy { ttl: Some(ttl) }
    }

    /// The lock is free. Returns `Some(busy)` when others queued first: the head gets the lock.
    pub(super) fn fair_free_lock(
        &self,
        table: &mut Table,
        req: &AcquireRequest<'_>,
        now: Instant,
    ) -> Option<Attempt> {
        let head = table.queues.get(req.id).and_then(|q| q.front().cloned());
        if head.as_deref().is_some_and(|h| h != req.waiter) && self.grant_next(table, req.id, now) {
            if table
                .locks
                .get(req.id)
                .is_some_and(|h| *h.owner == **req.owner)
            {
                // the waiters ahead were gone: the grant came to us
                return table.locks.get_mut(req.id).map(|held| {
                    held.expires = later(now, req.lease);
                    Attempt::Acquired { token: held.token }
                });
            }
            if req.will_wait {
                enqueue(table, req.id, req.waiter);
            }
            return Some(Attempt::Busy {
                ttl: Some(self.claim),
            });
        }
        dequeue(table, req.id, req.waiter);
        None
    }

    /// Grant the free lock `id` to the first queued owner that still waits. True when granted.
    pub(super) fn grant_next(&self, table: &mut Table, id: &LockId, now: Instant) -> bool {
        loop {
            let Some(head) = table.queues.get_mut(id).and_then(|q| q.pop_front()) else {
                table.queues.remove(id);
                return false;
            };
            let token = self.next_token();
            let held = Holder {
                owner: Arc::from(owner_of(&head)),
                count: 1,
                token,
                expires: now + self.claim,
                mode: crate::options::Mode::Fair,
                meta: super::HoldMeta::new(now, None),
                granted: true,
            };
            table.insert(id, held, now);
            if self.waiters.grant(id, &head, token) {
                return true;
            }
            table.locks.remove(id);
        }
    }

    /// `waiter` stopped waiting for `id` (a lock of `mode`): leave the queue, and pass on a grant
    /// it did not use.
    pub(crate) fn leave_queue(&self, id: &LockId, waiter: &str, mode: Mode, grant: Option<u64>) {
        if mode.is_shared() {
            return self.shared_leave_queue(id, waiter, grant);
        }
        let now = Instant::now();
        let mut table = self.table();
        dequeue(&mut table, id, waiter);
        let owner = owner_of(waiter);
        let Some(expected) = grant else {
            return;
        };
        let unused_grant = table
            .holder(id, now)
            .is_some_and(|h| *h.owner == *owner && h.count == 1 && h.token == expected);
        if unused_grant {
            table.locks.remove(id);
            self.grant_next(&mut table, id, now);
        }
    }

    /// True per waiter still queued behind a live holder; false: it should re-check now.
    pub(crate) fn heartbeat(&self, batch: &[LockParty]) -> Vec<bool> {
        let now = Instant::now();
        let mut table = self.table();
        batch
            .iter()
            .map(|w| {
                if shared_kind(&w.owner).is_some() {
                    return table.waits_for_shared(&w.id, &w.owner, now);
                }
                let queued = table
                    .queues
                    .get(&w.id)
                    .is_some_and(|q| q.iter().any(|queued| *queued == w.owner));
                queued && table.holder(&w.id, now).is_some()
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::ids::OwnerId;
    use crate::waiters::WaitRegistry;

    fn request<'a>(id: &'a LockId, owner: &'a OwnerId, queued: bool) -> AcquireRequest<'a> {
        AcquireRequest {
            id,
            owner,
            waiter: owner,
            lease: Duration::from_secs(30),
            will_wait: true,
            others_waiting: false,
            mode: Mode::Fair,
            queued,
            leader: false,
            held: None,
            label: "test",
            request: None,
        }
    }

    #[test]
    fn waiters_that_leave_leave_no_queue_behind() {
        let waiters: Arc<WaitRegistry> = Arc::default();
        let backend = MemoryBackend::new(waiters, Duration::from_secs(1), Arc::from("test"));
        let (a, b) = (LockId::new("a"), LockId::new("b"));
        let (holder, waiter) = (OwnerId::new("holder"), OwnerId::new("waiter"));
        assert!(matches!(
            backend.try_acquire(&request(&a, &holder, false)),
            Attempt::Acquired { .. }
        ));
        assert!(matches!(
            backend.try_acquire(&request(&a, &waiter, false)),
            Attempt::Busy { .. }
        ));
        assert_eq!(backend.table().queues.len(), 1);
        // a cancelled waiter
        backend.leave_queue(&a, "waiter", Mode::Fair, None);
        assert_eq!(backend.table().queues.len(), 0);

        // a waiter that finds the lock free at its turn takes it and leaves the queue
        assert!(matches!(
            backend.try_acquire(&request(&b, &holder, false)),
            Attempt::Acquired { .. }
        ));
        assert!(matches!(
            backend.try_acquire(&request(&b, &waiter, false)),
            Attempt::Busy { .. }
        ));
        backend.table().locks.clear();
        assert!(matches!(
            backend.try_acquire(&request(&b, &waiter, true)),
            Attempt::Acquired { .. }
        ));
        assert_eq!(backend.table().queues.len(), 0);
    }
}
