//! Where locks live. One internal interface — try to acquire, release, renew, abandon — served by the
//! in-memory backend and by Redis. The manager drives it; a backend knows nothing of HTTP or tasks.

mod calls;
pub(crate) mod memory;
mod outage_log;
#[cfg(feature = "redis")]
pub(crate) mod quorum;
mod ready;
#[cfg(feature = "redis")]
pub(crate) mod redis;
mod takeover;

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{oneshot, Notify};

use crate::background::{Background, BackgroundQueue};
use crate::error::BoxError;
use crate::ids::OwnerId;
use crate::inbox_proof::InboxProof;
use crate::key::LockKey;
use crate::options::Mode;
use crate::state::LockState;
use crate::waiters::{Departure, LockId, WaitRegistry};

pub(crate) use calls::{
    drift, jitter, owner_of, shared_family, shared_kind, shared_kind_of, AcquireRequest, Attempt,
    LockParty, Released, ToRelease, TOKEN_BLOCK,
};
pub(crate) use outage_log::OutageLog;
pub(crate) use ready::Readiness;
#[cfg(feature = "redis")]
pub(crate) use ready::ServerCheck;

/// What a backend's connections share with the manager they serve: its id, its local waiters (the
/// inbox wakes them), where work finishes in the background, and the signal that a connection came
/// back (the server may have restarted: the watchdog renews every lease at once).
#[derive(Debug, Clone)]
pub(crate) struct Wiring {
    pub(crate) manager_id: Arc<str>,
    pub(crate) waiters: Arc<WaitRegistry>,
    pub(crate) background: Background,
    pub(crate) reconnected: Arc<Notify>,
    /// The servers a readiness probe asks.
    pub(crate) ready: Arc<Readiness>,
    /// Where the inboxes and the requests report an outage (logged once).
    pub(crate) outages: Arc<OutageLog>,
    /// What the inbox proves of its subscription, for holds that may be taken over as dead.
    pub(crate) inbox_proof: Arc<InboxProof>,
}

impl Wiring {
    /// The wiring of a new manager, and the queue its background work arrives in.
    pub(crate) fn new(manager_id: Arc<str>) -> (Wiring, BackgroundQueue) {
        let (background, queue) = Background::new();
        let wiring = Wiring {
            manager_id,
            waiters: Arc::default(),
            background,
            reconnected: Arc::default(),
            ready: Arc::default(),
            outages: Arc::default(),
            inbox_proof: Arc::new(InboxProof::new(None)),
        };
        (wiring, queue)
    }
}

/// Stops a backend's inbox tasks when dropped (one per Redis server).
#[derive(Debug, Default)]
pub(crate) struct InboxStop(Vec<oneshot::Sender<()>>);

impl InboxStop {
    /// A stop for one more inbox: the inbox ends when the receiver fires.
    pub(crate) fn add(&mut self) -> oneshot::Receiver<()> {
        let (stop, stopped) = oneshot::channel();
        self.0.push(stop);
        stopped
    }
}

/// The backend of one manager.
#[derive(Debug)]
pub(crate) enum Backend {
    Memory(memory::MemoryBackend),
    #[cfg(feature = "redis")]
    Redis(Arc<redis::RedisBackend>),
    /// A majority of N independent Redis masters (RedLock).
    #[cfg(feature = "redis")]
    Quorum(Arc<quorum::QuorumBackend>),
}

impl Backend {
    /// The backend's name for the lock `key`.
    pub(crate) fn lock_id(&self, key: &LockKey) -> LockId {
        match self {
            Backend::Memory(_) => LockId::new(key.as_str()),
            #[cfg(feature = "redis")]
            Backend::Redis(r) => r.lock_id(key),
            #[cfg(feature = "redis")]
            Backend::Quorum(q) => q.lock_id(key),
        }
    }

    /// Why this backend cannot serve `mode`, if it cannot.
    pub(crate) fn unsupported(&self, mode: Mode) -> Option<&'static str> {
        match self {
            #[cfg(feature = "redis")]
            Backend::Quorum(_) if mode.is_queued() => Some(quorum::QUEUED_REFUSED),
            _ => None,
        }
    }

    pub(crate) async fn try_acquire(&self, req: &AcquireRequest<'_>) -> Result<Attempt, BoxError> {
        match self {
            Backend::Memory(m) => Ok(m.try_acquire(req)),
            #[cfg(feature = "redis")]
            Backend::Redis(r) => r.try_acquire(req).await,
            #[cfg(feature = "redis")]
            // boxed: a quorum's future is many times a single server's, and every attempt's
            // future is as large as its largest backend's
            Backend::Quorum(q) => Box::pin(q.try_acquire(req)).await,
        }
    }

    /// Whether anybody but `leader` waits for `id` in the backend, where requests of other
    /// processes queue (`true` when this backend cannot tell: a cohort there keeps nobody
    /// waiting in memory on the strength of it).
    pub(crate) async fn queued_behind(&self, id: &LockId, leader: &str) -> Result<bool, BoxError> {
        match self {
            #[cfg(feature = "redis")]
            Backend::Redis(r) => r.queued_behind(id, leader).await,
            _ => Ok(true),
        }
    }

    /// How long one acquire attempt may keep its caller waiting, when the backend call itself may
    /// outlive it (a single Redis server: the attempt keeps listening for a late reply, so that a
    /// lock it took after its caller gave up is released at once). `None`: the call is bounded.
    pub(crate) fn attempt_timeout(&self) -> Option<Duration> {
        match self {
            Backend::Memory(_) => None,
            #[cfg(feature = "redis")]
            Backend::Redis(r) => Some(r.attempt_timeout()),
            #[cfg(feature = "redis")]
            Backend::Quorum(_) => None,
        }
    }

    /// Release one hold of `owner` on `id`, the one made under fencing token `token`: only holds
    /// under `token` go. Even while the hold's lease is not `lost`, the owner's hold in the
    /// backend may be another one: an attempt that found a hold of the owner its guards did not
    /// have (a restart brought it back, or this release was still on its way) replaced it.
    /// A quorum release goes by the tokens each master issued for this hold.
    /// `last_used` is the last token handed out under the hold, when known (else the whole block
    /// counts as used): a single server's counter need not pass tokens nobody got.
    pub(crate) async fn release(
        &self,
        id: &LockId,
        owner: &OwnerId,
        mode: Mode,
        token: u64,
        last_used: Option<u64>,
    ) -> Result<Released, BoxError> {
        let exact = Some(token);
        match self {
            Backend::Memory(m) => Ok(m.release(id, owner, mode, exact)),
            #[cfg(feature = "redis")]
            Backend::Redis(r) if mode.is_shared() => r.shared_release(id, owner, exact).await,
            #[cfg(feature = "redis")]
            Backend::Redis(r) => r.release(id, owner, token, last_used).await,
            #[cfg(feature = "redis")]
            // boxed, as in `try_acquire`
            Backend::Quorum(q) => Box::pin(q.release(id, owner, token)).await,
        }
    }

    /// Release `hold` without waiting, when the backend can without a task: a lock of a single
    /// Redis server, in an exclusive or fair mode, on an open link of the crate's own pool. The
    /// release is written at once, and its answer settled where the link reads it; `after` is
    /// dropped once it is done. It comes back otherwise: the caller releases in the background.
    pub(crate) fn release_detached<A: Send + 'static>(
        &self,
        hold: &ToRelease<'_>,
        after: A,
        background: &Background,
    ) -> Result<(), A> {
        match self {
            #[cfg(feature = "redis")]
            Backend::Redis(r) if !hold.mode.is_shared() => {
                r.release_detached(hold, after, background)
            }
            _ => Err(after),
        }
    }

    /// Renew every lock of `batch` to `lease`; one flag per lock, false when it is not held any more.
    pub(crate) async fn renew(
        &self,
        batch: &[LockParty],
        lease: Duration,
    ) -> Result<Vec<bool>, BoxError> {
        match self {
            Backend::Memory(m) => Ok(m.renew(batch, lease)),
            #[cfg(feature = "redis")]
            Backend::Redis(r) => r.renew(batch, lease).await,
            #[cfg(feature = "redis")]
            Backend::Quorum(q) => q.renew(batch, lease).await,
        }
    }

    /// A request of this process stopped waiting for `id` (cancelled or timed out).
    pub(crate) async fn abandon(&self, id: &LockId, departure: Departure) -> Result<(), BoxError> {
        match self {
            // Every waiter of a memory lock is in this process: nothing to tell anyone else.
            Backend::Memory(_) => Ok(()),
            #[cfg(feature = "redis")]
            Backend::Redis(r) => r.abandon(id, departure).await,
            #[cfg(feature = "redis")]
            Backend::Quorum(q) => q.abandon(id, departure).await,
        }
    }

    /// A waiter (`<owner>|<n>`, with `|<kind>` for a shared lock) of a lock of `mode` left the
    /// queue of `id`. A grant made to it that it never used is passed on to the next waiter: on
    /// Redis, any grant to this wait (the lock names the wait it was granted to); in memory, the
    /// one under `grant`, its token.
    pub(crate) async fn leave_queue(
        &self,
        id: &LockId,
        waiter: &str,
        mode: Mode,
        grant: Option<u64>,
    ) -> Result<(), BoxError> {
        match self {
            Backend::Memory(m) => {
                m.leave_queue(id, waiter, mode, grant);
                Ok(())
            }
            #[cfg(feature = "redis")]
            Backend::Redis(r) if mode.is_shared() => r.shared_leave_queue(id, waiter).await,
            #[cfg(feature = "redis")]
            Backend::Redis(r) => r.leave_queue(id, waiter).await,
            // Fair locks are refused on a quorum: nobody of this manager is ever queued.
            #[cfg(feature = "redis")]
            Backend::Quorum(_) => Ok(()),
        }
    }

    /// Push back the eviction deadline of queued fair waiters; one flag per waiter, false when it
    /// should re-check now: it is not queued any more (granted, or evicted), or the lock it waits
    /// for is free (a grant ran out unused).
    pub(crate) async fn heartbeat(&self, batch: &[LockParty]) -> Result<Vec<bool>, BoxError> {
        match self {
            Backend::Memory(m) => Ok(m.heartbeat(batch)),
            #[cfg(feature = "redis")]
            Backend::Redis(r) => r.heartbeat(batch).await,
            // Never queued (fair locks are refused): every waiter just keeps waiting.
            #[cfg(feature = "redis")]
            Backend::Quorum(_) => Ok(vec![true; batch.len()]),
        }
    }

    /// The state of lock `id`, named `key` in the answer, read at one instant (on a quorum, at
    /// one instant per master).
    pub(crate) async fn inspect(&self, id: &LockId, key: &str) -> Result<LockState, BoxError> {
        match self {
            Backend::Memory(m) => Ok(m.inspect(id, key)),
            #[cfg(feature = "redis")]
            Backend::Redis(r) => r.inspect(id, key).await,
            #[cfg(feature = "redis")]
            Backend::Quorum(q) => q.inspect(id, key).await,
        }
    }

    /// The held or waited-for locks whose names start with `prefix`, `limit` at most.
    pub(crate) async fn list(
        &self,
        prefix: &str,
        limit: usize,
    ) -> Result<Vec<LockState>, BoxError> {
        match self {
            Backend::Memory(m) => Ok(m.list(prefix, limit)),
            #[cfg(feature = "redis")]
            Backend::Redis(r) => r.list(prefix, limit).await,
            #[cfg(feature = "redis")]
            Backend::Quorum(q) => q.list(prefix, limit).await,
        }
    }

    /// End every hold of lock `id` now and pass it on as a release does; true when a hold was
    /// ended.
    pub(crate) async fn force_release(&self, id: &LockId) -> Result<bool, BoxError> {
        match self {
            Backend::Memory(m) => Ok(m.force_release(id)),
            #[cfg(feature = "redis")]
            Backend::Redis(r) => r.force_release(id).await,
            #[cfg(feature = "redis")]
            Backend::Quorum(q) => q.force_release(id).await,
        }
    }

    /// How many locks one renewal call may carry.
    pub(crate) fn renew_batch_size(&self) -> usize {
        512
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drift_and_jitter_stay_in_bounds() {
        assert_eq!(drift(Duration::from_secs(30)), Duration::from_millis(302));
        assert_eq!(drift(Duration::from_millis(100)), Duration::from_millis(3));
        assert_eq!(jitter(Duration::ZERO), Duration::ZERO);
        for _ in 0..100 {
            assert!(jitter(Duration::from_millis(3)) <= Duration::from_millis(3));
        }
    }

    /// An attempt's future is moved to the heap whole, and so is a release's: a backend's rare
    /// paths are boxed, so that the futures of every backend stay within a couple of kilobytes
    /// (a future is as large as its largest branch, whichever backend runs it).
    #[test]
    fn an_attempt_and_a_release_stay_small() {
        let waiters = Arc::new(WaitRegistry::default());
        let memory = memory::MemoryBackend::new(waiters, Duration::from_secs(5), Arc::from("test"));
        let backend = Backend::Memory(memory);
        let (id, owner) = (LockId::new("small"), OwnerId::new("m:1"));
        let req = AcquireRequest {
            id: &id,
            owner: &owner,
            waiter: "m:1",
            lease: Duration::from_secs(30),
            will_wait: false,
            others_waiting: false,
            mode: Mode::Exclusive,
            queued: false,
            leader: false,
            held: None,
            label: "test",
            request: None,
        };
        let attempt = backend.try_acquire(&req);
        let release = backend.release(&id, &owner, Mode::Exclusive, 1, None);
        let sizes = [size_of_val(&attempt), size_of_val(&release)];
        assert!(sizes.iter().all(|&size| size <= 2048), "{sizes:?} bytes");
    }
}
