//! Where locks live. One internal interface — try to acquire, release, renew, abandon — served by the
//! in-memory backend and by Redis. The manager drives it; a backend knows nothing of HTTP or tasks.

pub(crate) mod memory;
#[cfg(feature = "redis")]
pub(crate) mod quorum;
#[cfg(feature = "redis")]
pub(crate) mod redis;

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{oneshot, Notify};

use crate::background::{Background, BackgroundQueue};
use crate::error::BoxError;
use crate::ids::OwnerId;
use crate::key::LockKey;
use crate::options::Mode;
use crate::waiters::{Departure, LockId, WaitRegistry};

/// What a backend's connections share with the manager they serve: its id, its local waiters (the
/// inbox wakes them), where work finishes in the background, and the signal that a connection came
/// back (the server may have restarted: the watchdog renews every lease at once).
#[derive(Debug, Clone)]
pub(crate) struct Wiring {
    pub(crate) manager_id: Arc<str>,
    pub(crate) waiters: Arc<WaitRegistry>,
    pub(crate) background: Background,
    pub(crate) reconnected: Arc<Notify>,
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

/// One attempt to take a lock.
#[derive(Debug)]
pub(crate) struct AcquireRequest<'a> {
    pub(crate) id: &'a LockId,
    pub(crate) owner: &'a OwnerId,
    /// This request's name in a fair lock's queue, `<owner>|<n>`: one per wait, so that nothing
    /// meant for an earlier wait of the same owner reaches this one (the owner, when the request
    /// does not wait).
    pub(crate) waiter: &'a str,
    pub(crate) lease: Duration,
    /// The caller will wait if the lock is busy: the backend records that this process waits.
    pub(crate) will_wait: bool,
    /// Other requests of this process still wait for the same lock after this one.
    pub(crate) others_waiting: bool,
    pub(crate) mode: Mode,
    /// An earlier attempt of this request found the lock busy and recorded it as waiting. Fair
    /// mode: the owner joined the lock's queue (a lock found held by it is its grant, not a
    /// re-entry). Exclusive mode: the backend may list this process among the waiting ones.
    pub(crate) queued: bool,
    /// The owner id is a cohort's (or a read group's) leader's, made for this one hold: it holds
    /// nothing of the lock and never re-enters it, so that a backend may take the lock in a way
    /// no re-entry could find (Redis's plain path).
    pub(crate) leader: bool,
    /// The token of the hold the owner has of the lock in this manager (its live guards), or
    /// `None` when it holds nothing there. Only that hold is re-entered: a hold of the owner that
    /// the backend has under another token (a restart from a snapshot brought an old one back)
    /// is not the owner's any more, and the attempt replaces it with a fresh one under a new
    /// token. With `None`, a fair lock may also be taken on Redis's plain path.
    pub(crate) held: Option<u64>,
}

/// Tokens the backend reserves with every acquisition: its own and the ones after it, for local
/// hand-offs (`TOKEN_BLOCK` in `common.lua`).
pub(crate) const TOKEN_BLOCK: u32 = 64;

/// The clock-drift allowance of a lease: a server's clock may run up to 1% faster than the
/// client's, plus 2 ms for the granularity of its expiry (RedLock's rule). Each Redis server is
/// asked to keep a lease for `lease + drift`, while the client counts `lease`: the lost signal
/// then fires before any server may free the lock, even with its clock that far ahead.
pub(crate) fn drift(lease: Duration) -> Duration {
    lease / 100 + Duration::from_millis(2)
}

/// A random duration in `[0, max]`, so that processes that would act at once (retry a split lock,
/// reconnect) do not act in lockstep.
pub(crate) fn jitter(max: Duration) -> Duration {
    let nanos = u64::try_from(max.as_nanos()).unwrap_or(u64::MAX);
    if nanos == 0 {
        return Duration::ZERO;
    }
    // A v4 UUID is 122 random bits from the OS: plenty, and no extra dependency.
    let random = uuid::Uuid::new_v4().as_u128() as u64;
    Duration::from_nanos(random % nanos.saturating_add(1))
}

/// The kind of a shared lock's waiter, `<owner>|<n>|<kind>`: `r`, `w` or `n`; `None` for any
/// other waiter (`<owner>|<n>`).
pub(crate) fn shared_kind(waiter: &str) -> Option<char> {
    let mut parts = waiter.rsplitn(3, '|');
    let (last, _) = (parts.next()?, parts.next()?);
    parts.next()?;
    let mut chars = last.chars();
    let kind = chars.next()?;
    chars.next().is_none().then_some(kind)
}

/// The kind a wait for a lock of `mode` names itself by (see [`shared_kind`]).
pub(crate) fn shared_kind_of(mode: Mode) -> Option<char> {
    match mode {
        Mode::Read => Some('r'),
        Mode::Write => Some('w'),
        Mode::Semaphore(_) => Some('n'),
        _ => None,
    }
}

/// The family a shared lock of `mode` records itself as: `rw`, or `s` and the number of permits.
pub(crate) fn shared_family(mode: Mode) -> Option<String> {
    match mode {
        Mode::Read | Mode::Write => Some("rw".to_owned()),
        Mode::Semaphore(n) => Some(format!("s{n}")),
        _ => None,
    }
}

/// The owner id of a fair waiter, `<owner>|<n>` (owner ids have no `|`).
pub(crate) fn owner_of(waiter: &str) -> &str {
    waiter.split('|').next().unwrap_or(waiter)
}

/// The outcome of one attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Attempt {
    /// The caller owns the lock (again, if it already did) under this fencing token.
    Acquired { token: u64 },
    /// Someone else holds it for at most `ttl` more (`None`: unknown, retry soon).
    Busy { ttl: Option<Duration> },
    /// The lock is held or waited for in another family of modes, `held` (exclusive, fair,
    /// read/write, semaphore; or a semaphore of another size): families are not mixed on one
    /// lock, since neither would see the other's holders and waiters.
    OtherMode { held: Mode },
    /// The owner holds a read of the lock and asked to write: a read hold does not become a
    /// write hold (two readers doing so would wait for each other for ever).
    NoUpgrade,
}

/// One hold to release: see [`Backend::release`] for what each part means.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ToRelease<'a> {
    pub(crate) id: &'a LockId,
    pub(crate) owner: &'a OwnerId,
    pub(crate) mode: Mode,
    pub(crate) token: u64,
    pub(crate) last_used: Option<u64>,
}

/// The outcome of a release.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Released {
    /// The lock is free now (one waiter was told).
    Freed,
    /// The owner still holds it (re-entry count above zero).
    StillHeld,
    /// The owner did not hold it any more: the lease had been lost.
    NotHeld,
}

/// A lock and one party to it: the owner that holds it (as the watchdog renews it), or the wait
/// queued for it (as the watchdog heartbeats it: `owner` is then the wait's name, `<owner>|<n>`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct LockParty {
    pub(crate) id: LockId,
    pub(crate) owner: Arc<str>,
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
        let backend = Backend::Memory(memory::MemoryBackend::new(waiters, Duration::from_secs(5)));
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
        };
        let attempt = backend.try_acquire(&req);
        let release = backend.release(&id, &owner, Mode::Exclusive, 1, None);
        let sizes = [size_of_val(&attempt), size_of_val(&release)];
        assert!(sizes.iter().all(|&size| size <= 2048), "{sizes:?} bytes");
    }
}
