//! The requests of this process that wait for a lock, by lock.
//!
//! A backend's wake-up ("lock K is free") is routed to ONE local waiter of K, in arrival order, so a
//! release never wakes a herd. Waiters register *before* each attempt, so a wake-up that arrives while
//! an attempt is in flight is kept (as a permit) rather than lost. A fair lock's grant ("the lock is
//! yours, token T") goes to the one waiter it names.

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use tokio::sync::Notify;

pub(crate) use crate::ids::LockId;
use crate::ids::{numbered, IdMap, OwnerId};
use crate::options::Mode;
use crate::sync::{seeded, AtomicBool, AtomicU64, Defect, Mutex, MutexGuard};

/// One waiting request.
#[derive(Debug)]
pub(crate) struct Waiter {
    seq: u64,
    owner: OwnerId,
    /// This wait's name in a fair queue and its grant messages: `<owner>|<seq>`, never the name
    /// of an earlier wait of the same owner.
    name: Arc<str>,
    woken: AtomicBool,
    /// The request waits in a queue of the backend (a fair or shared lock), which grants it the
    /// lock: it needs none of the wake-ups meant for requests waiting in exclusive mode.
    in_queue: AtomicBool,
    /// The fencing token of a fair grant (0: none).
    granted: AtomicU64,
    notify: Notify,
    /// Set, and `left` notified, when the waiter leaves the registry.
    gone: AtomicBool,
    left: Notify,
    /// What the request waits for, and since when (for the oldest-wait gauge).
    wait: WaitStart,
}

/// The mode a request waits in, and when its acquisition began.
#[derive(Debug, Clone, Copy)]
pub(crate) struct WaitStart {
    pub(crate) mode: Mode,
    pub(crate) since: Instant,
}

impl Waiter {
    fn wake(&self) {
        self.woken.store(true, Ordering::SeqCst);
        self.notify.notify_one();
    }

    /// Resolves after a wake-up (at once when one arrived since the last call).
    pub(crate) async fn woken(&self) {
        self.notify.notified().await;
        self.woken.store(false, Ordering::SeqCst);
    }

    fn has_unused_wake(&self) -> bool {
        self.woken.load(Ordering::SeqCst)
    }

    /// Resolves once this waiter has left the registry (it acquired the lock, or gave up).
    pub(crate) async fn departed(&self) {
        loop {
            let left = self.left.notified();
            tokio::pin!(left);
            left.as_mut().enable();
            if self.gone.load(Ordering::SeqCst) {
                return;
            }
            left.await;
        }
    }

    /// This wait's name: `<owner>|<n>`.
    pub(crate) fn name(&self) -> &Arc<str> {
        &self.name
    }

    /// The token of a grant received for this waiter, if any.
    pub(crate) fn grant(&self) -> Option<u64> {
        match self.granted.load(Ordering::SeqCst) {
            0 => None,
            token => Some(token),
        }
    }

    /// The request waits in the backend's queue of the lock from now on (see
    /// [`WaitRegistry::wake_unqueued`]).
    pub(crate) fn join_queue(&self) {
        self.in_queue.store(true, Ordering::SeqCst);
    }

    /// Keep the last wake-up as unused: the attempt it led to failed, so the lock may be free
    /// with nobody told. When the request then leaves, the wake-up is passed on.
    pub(crate) fn keep_wake(&self) {
        self.woken.store(true, Ordering::SeqCst);
    }

    /// Forget a grant received: the request checks with the backend instead whether it holds it.
    pub(crate) fn forget_grant(&self) {
        self.granted.store(0, Ordering::SeqCst);
    }
}

/// Every local waiter, by lock.
#[derive(Debug, Default)]
pub(crate) struct WaitRegistry {
    by_lock: Mutex<IdMap<LockId, VecDeque<Arc<Waiter>>>>,
    next_seq: AtomicU64,
    /// How many times every waiter was woken: each time a connection to the backend dropped or
    /// came back (or the manager shut down), when messages may have been lost and the server may
    /// have restarted.
    wake_alls: AtomicU64,
    /// How many times the backend left a command unanswered for the command timeout.
    stalls: AtomicU64,
}

/// What a waiter leaving the registry asks the backend to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Departure {
    /// It was the last local waiter of its lock: the backend may forget that this process waits.
    pub(crate) last: bool,
    /// It held a wake-up that no local waiter could take: the backend must pass it on.
    pub(crate) pass_on: bool,
}

impl WaitRegistry {
    fn lock(&self) -> MutexGuard<'_, IdMap<LockId, VecDeque<Arc<Waiter>>>> {
        // A panic while holding this lock cannot leave the map inconsistent (each operation is one
        // insert or removal), so a poisoned lock is still usable.
        self.by_lock.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Add a waiter for `id`, behind the ones already there; unless a waiter of the same owner is
    /// there already: that one is returned as the error, and nothing is added. One owner waits
    /// for a lock through one request at a time (a lock's queue and its grants know owners, not
    /// requests), so the second request waits for the first to be done.
    /// A wait for a shared lock names its kind (`r`, `w`, `n`) after its number:
    /// `<owner>|<n>|<kind>`, so that the lock's queue tells reads from writes.
    pub(crate) fn register(
        &self,
        id: &LockId,
        owner: &OwnerId,
        kind: Option<char>,
        wait: WaitStart,
    ) -> Result<Arc<Waiter>, Arc<Waiter>> {
        let mut map = self.lock();
        let queue = map.entry(id.clone()).or_default();
        if let Some(sibling) = queue.iter().find(|w| w.owner == *owner) {
            return Err(sibling.clone());
        }
        let seq = self.next_seq.fetch_add(1, Ordering::Relaxed);
        let waiter = Arc::new(Waiter {
            seq,
            owner: owner.clone(),
            name: numbered(owner, '|', seq, kind),
            woken: AtomicBool::new(false),
            in_queue: AtomicBool::new(false),
            granted: AtomicU64::new(0),
            notify: Notify::new(),
            gone: AtomicBool::new(false),
            left: Notify::new(),
            wait,
        });
        queue.push_back(waiter.clone());
        Ok(waiter)
    }

    /// Wake the first waiter of `id` that has no wake-up pending. Returns false when this process has
    /// no waiter for `id` (the wake-up must then be passed on to another process).
    pub(crate) fn wake_one(&self, id: &LockId) -> bool {
        let map = self.lock();
        let Some(queue) = map.get(id) else {
            return false;
        };
        if let Some(w) = queue.iter().find(|w| !w.has_unused_wake()) {
            w.wake();
        }
        !queue.is_empty()
    }

    /// Wake every waiter of `id` that is not in the backend's queue of it: the lock went over to
    /// fair order, and a request waiting in exclusive mode would sleep through its hand-offs
    /// (they are grants to the queue). Each one woken finds the fair state and queues.
    pub(crate) fn wake_unqueued(&self, id: &LockId) {
        if let Some(queue) = self.lock().get(id) {
            queue
                .iter()
                .filter(|w| !w.in_queue.load(Ordering::SeqCst))
                .for_each(|w| w.wake());
        }
    }

    /// Hand a fair grant to the waiter of `id` named `name`. Returns false when it waits no more
    /// (the grant must then be passed on), even if another wait of the same owner does.
    pub(crate) fn grant(&self, id: &LockId, name: &str, token: u64) -> bool {
        let map = self.lock();
        let Some(waiter) = map
            .get(id)
            .and_then(|q| q.iter().find(|w| &*w.name == name))
        else {
            return false;
        };
        waiter.granted.store(token.max(1), Ordering::SeqCst);
        waiter.wake();
        true
    }

    /// Wake the waiter of `id` named `name` (a heartbeat found it out of the queue).
    pub(crate) fn wake_waiter(&self, id: &LockId, name: &str) {
        if let Some(queue) = self.lock().get(id) {
            queue
                .iter()
                .filter(|w| &*w.name == name)
                .for_each(|w| w.wake());
        }
    }

    /// How many times [`wake_all`](Self::wake_all) ran: a change says a connection dropped or
    /// came back since.
    pub(crate) fn wake_alls(&self) -> u64 {
        self.wake_alls.load(Ordering::SeqCst)
    }

    /// Wake every waiter (after the inbox reconnected: messages may have been lost).
    pub(crate) fn wake_all(&self) {
        self.wake_alls.fetch_add(1, Ordering::SeqCst);
        for queue in self.lock().values() {
            queue.iter().for_each(|w| w.wake());
        }
    }

    /// How many times [`stalled`](Self::stalled) ran: a change during a wait says the backend
    /// stopped answering meanwhile.
    pub(crate) fn stalls(&self) -> u64 {
        self.stalls.load(Ordering::SeqCst)
    }

    /// The backend left a command unanswered for the command timeout (a frozen or cut-off
    /// server): wake every waiter, to end its wait as unavailable. A wake-up it sleeps for would
    /// not come, and another attempt would wait out the command timeout once more.
    pub(crate) fn stalled(&self) {
        self.stalls.fetch_add(1, Ordering::SeqCst);
        for queue in self.lock().values() {
            queue.iter().for_each(|w| w.wake());
        }
    }

    /// True when `id` has waiters besides the registered caller (who is in the queue until it
    /// leaves, so any second entry is someone else).
    pub(crate) fn has_others(&self, id: &LockId) -> bool {
        self.lock().get(id).is_some_and(|q| q.len() > 1)
    }

    /// Remove `me`. When `acquired` is false and `me` held an unused wake-up, the wake-up goes to the
    /// next local waiter, or — if there is none — the returned [`Departure`] says to pass it on.
    pub(crate) fn leave(&self, id: &LockId, me: &Waiter, acquired: bool) -> Departure {
        let departure = self.remove(id, me, acquired);
        me.gone.store(true, Ordering::SeqCst);
        me.left.notify_waiters();
        departure
    }

    fn remove(&self, id: &LockId, me: &Waiter, acquired: bool) -> Departure {
        let mut map = self.lock();
        let Some(queue) = map.get_mut(id) else {
            return Departure {
                last: true,
                pass_on: false,
            };
        };
        queue.retain(|w| w.seq != me.seq);
        let mut pass_on = !acquired && me.has_unused_wake() && !seeded(Defect::WakeKept);
        if pass_on {
            if let Some(next) = queue.iter().find(|w| !w.has_unused_wake()) {
                next.wake();
                pass_on = false;
            } else if !queue.is_empty() {
                pass_on = false; // every remaining waiter is already about to retry
            }
        }
        let last = queue.is_empty();
        if last {
            map.remove(id);
        }
        Departure { last, pass_on }
    }

    /// Number of waiting requests in this process (for tests and metrics).
    pub(crate) fn len(&self) -> usize {
        self.lock().values().map(VecDeque::len).sum()
    }

    /// The locks requests of this process wait for.
    pub(crate) fn locks(&self) -> Vec<LockId> {
        self.lock().keys().cloned().collect()
    }

    /// What each waiting request waits for, and since when.
    pub(crate) fn for_each_wait(&self, mut each: impl FnMut(WaitStart)) {
        let map = self.lock();
        map.values().flatten().for_each(|waiter| each(waiter.wait));
    }
}

#[cfg(all(test, tower_lock_shuttle))]
mod schedules;

#[cfg(test)]
mod tests {
    use super::*;

    fn start() -> WaitStart {
        WaitStart {
            mode: Mode::Exclusive,
            since: Instant::now(),
        }
    }

    #[tokio::test]
    async fn a_wake_goes_to_one_waiter_in_order_and_survives_a_cancel() {
        let reg = WaitRegistry::default();
        let id = LockId::new("k");
        let a = reg
            .register(&id, &OwnerId::new("o1"), None, start())
            .unwrap();
        let b = reg
            .register(&id, &OwnerId::new("o2"), None, start())
            .unwrap();
        assert!(reg.wake_one(&id));
        assert!(a.has_unused_wake());
        assert!(!b.has_unused_wake());
        // a is cancelled before using its wake-up: b gets it
        let d = reg.leave(&id, &a, false);
        assert_eq!(
            d,
            Departure {
                last: false,
                pass_on: false
            }
        );
        assert!(b.has_unused_wake());
        b.woken().await;
        assert!(!b.has_unused_wake());
        // b leaves with nothing pending: last, nothing to pass on
        let d = reg.leave(&id, &b, false);
        assert_eq!(
            d,
            Departure {
                last: true,
                pass_on: false
            }
        );
        assert!(!reg.wake_one(&id));
        assert_eq!(reg.len(), 0);
    }

    #[test]
    fn a_lone_cancelled_waiter_passes_its_wake_on() {
        let reg = WaitRegistry::default();
        let id = LockId::new("k");
        let a = reg
            .register(&id, &OwnerId::new("o"), None, start())
            .unwrap();
        reg.wake_one(&id);
        assert_eq!(
            reg.leave(&id, &a, false),
            Departure {
                last: true,
                pass_on: true
            }
        );
    }

    #[tokio::test]
    async fn one_owner_waits_through_one_request_at_a_time() {
        let reg = WaitRegistry::default();
        let id = LockId::new("k");
        let owner = OwnerId::new("o");
        let first = reg.register(&id, &owner, None, start()).unwrap();
        let sibling = reg.register(&id, &owner, None, start()).unwrap_err();
        assert_eq!(sibling.seq, first.seq);
        assert_eq!(reg.len(), 1);
        let departed = tokio::spawn(async move { sibling.departed().await });
        tokio::task::yield_now().await;
        assert!(!departed.is_finished());
        reg.leave(&id, &first, true);
        departed.await.unwrap();
        assert!(reg.register(&id, &owner, None, start()).is_ok());
    }
}
