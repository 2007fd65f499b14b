//! The ways to make a `LockManager`: in memory, on one Redis server, on a quorum of masters, on a
//! Redis Cluster, or through the builder.

use std::sync::Arc;

use super::cohort::DEFAULT_HANDOFFS;
use super::{new_manager_id, LockManager, LockManagerBuilder, Shared, Timing};
use super::{DEFAULT_FAIR_EVICTION, DEFAULT_LEASE};
use crate::backend::memory::MemoryBackend;
use crate::backend::{Backend, Wiring};
#[cfg(feature = "redis")]
use crate::error::LockError;

impl LockManager {
    /// An in-memory manager: locks shared by every request of this process (the embedded default,
    /// for one process, demos and tests). Needs no runtime until the first acquisition.
    pub fn memory() -> LockManager {
        Self::memory_with(Timing {
            lease: DEFAULT_LEASE,
            eviction: DEFAULT_FAIR_EVICTION,
            handoffs: DEFAULT_HANDOFFS,
            label: super::builder::default_label(),
        })
    }

    pub(crate) fn memory_with(timing: Timing) -> LockManager {
        let (wiring, queue) = Wiring::new(new_manager_id());
        let memory = MemoryBackend::new(
            wiring.waiters.clone(),
            timing.eviction,
            timing.label.clone(),
        );
        let backend = Arc::new(Backend::Memory(memory));
        let shared = Shared::new(backend, wiring, queue, timing, None);
        LockManager {
            shared: Arc::new(shared),
        }
    }

    /// A manager on one Redis server: a command pool, one inbox connection, one watchdog.
    /// Fails when the URL is invalid or the server cannot be reached.
    ///
    /// Needs Redis 7.0 or later: renewals use `PEXPIRE ... GT` and the inbox RESP3 pushes (see
    /// [the guide](crate::guide::redis#version)). The same holds for every Redis manager.
    #[cfg(feature = "redis")]
    pub async fn redis(url: &str) -> Result<LockManager, LockError> {
        Self::builder().redis(url).build().await
    }

    /// A quorum manager (RedLock): every lock is held on a majority of these `N ≥ 3` independent
    /// Redis masters. Each master gets its own command pool and its own inbox (one pub/sub
    /// connection); one watchdog renews every lease on every master. Fails when fewer than a
    /// majority of the masters can be reached.
    ///
    /// **Acquiring.** Every master is asked at once, each bounded by the node timeout
    /// ([`LockManagerBuilder::node_timeout`], 250 ms by default), and an attempt is decided as soon
    /// as its outcome is certain: a slow or frozen master costs nothing once the others answered
    /// (what is still in flight to it is finished in the background, and undone if it took a lock
    /// nobody holds any more); a master that failed its last call is not waited for at all while
    /// the others can decide without it, so a dead master does not slow every attempt down (nor
    /// make attempts hold what the others granted while they wait). Each master is asked to keep
    /// the lock for `lease + drift`, the drift allowance being `lease/100 + 2 ms`. The attempt
    /// counts only if a majority granted it and its validity `(lease + drift) − elapsed − drift` is
    /// positive; the guard then counts its lease from the start of the attempt, which is exactly
    /// how long every granting master is sure to keep the lock, even with clocks 1% apart.
    /// Otherwise the attempt is released on every master where it may have been taken, and the
    /// request waits for a wake-up from any master (it never polls; it waits at most until the
    /// first busy master's holder would expire), after a random pause so that contenders who split
    /// the lock do not retry in lockstep.
    ///
    /// **Busy or down.** When a majority of the masters answered but fewer than a majority granted
    /// the lock, it is busy: `try_acquire` returns `Ok(None)` and `acquire` waits. When fewer than a
    /// majority answered at all, the quorum is down: [`LockError::Unavailable`], at once (whatever
    /// the masters that answered said).
    ///
    /// **Holding.** A lease renewed by a majority is kept. It is lost at once when a majority
    /// answered and fewer than a majority still held the lock, and after a whole lease without
    /// renewal when fewer than a majority could be reached. Re-entry (with the same token), `lost()`,
    /// release on drop, wait timeouts and cancellation work as on one server.
    ///
    /// **Masters that restart empty** can grant a lock again that a majority still counted on
    /// them for: run them with `appendfsync always`, or keep a crashed master out for longer than
    /// the longest lease before it rejoins (RedLock's "delayed restart").
    ///
    /// **Dead holders** are taken over, as on one server (grace 750 ms by default; see
    /// [`takeover_grace`](crate::LockManagerBuilder::takeover_grace)): each master ends its own
    /// part of a hold whose manager's inbox there has been gone for the grace, and a holder counts
    /// its hold lost once fewer than a majority of its masters can prove its inbox, before any
    /// waiter can have a majority. One master down or frozen loses no hold.
    ///
    /// **Fair locks are refused** with [`LockError::Unsupported`]: each master would keep its own
    /// FIFO queue, the parallel requests reach the masters in different orders, and grants made by
    /// different masters to different heads would leave nobody with a majority. One order across
    /// masters needs consensus, which RedLock does not have.
    ///
    /// **Fencing tokens.** A quorum lock's token is the largest token of the majority that granted
    /// it, and each master issues `max(last + 1, its clock in µs)`. A later holder's token is
    /// larger than an earlier holder's whenever the masters' clocks agree to within the time
    /// between the two acquisitions: after a lease lost by expiry (the case fencing exists for),
    /// clocks within a lease of each other suffice; right after an explicit release, a master whose
    /// clock runs ahead by more than a round trip can make the next token smaller. A storage that
    /// rejects older tokens then rejects the new holder (no corruption, but no progress). Where
    /// tokens must increase whatever the clocks do, use one Redis server and its fencing tokens
    /// instead (see [the guide](crate::guide::guarantees#quorum-or-one-server)).
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), tower_lock::LockError> {
    /// use tower_lock::{LockManager, LockOptions};
    ///
    /// let manager = LockManager::quorum([
    ///     "redis://10.0.0.1:6379",
    ///     "redis://10.0.0.2:6379",
    ///     "redis://10.0.0.3:6379",
    /// ])
    /// .await?;
    /// let guard = manager.acquire("account:42", &LockOptions::exclusive()).await?;
    /// let _token = guard.fencing_token();
    /// guard.release().await?;
    /// # Ok(())
    /// # }
    /// ```
    #[cfg(feature = "redis")]
    pub async fn quorum<I, S>(urls: I) -> Result<LockManager, LockError>
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Self::builder().quorum(urls).build().await
    }

    /// A manager on the Redis Cluster that `seeds` (some of its nodes) belong to: see
    /// [`LockManagerBuilder::cluster`].
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), tower_lock::LockError> {
    /// use tower_lock::{LockManager, LockOptions};
    ///
    /// let manager = LockManager::cluster(["redis://10.0.0.1:7000", "redis://10.0.0.2:7000"]).await?;
    /// let guard = manager.acquire("account:42", &LockOptions::fair()).await?;
    /// guard.release().await?;
    /// # Ok(())
    /// # }
    /// ```
    #[cfg(feature = "cluster")]
    pub async fn cluster<I, S>(seeds: I) -> Result<LockManager, LockError>
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Self::builder().cluster(seeds).build().await
    }

    /// Configure a manager: namespace, lease, backend.
    pub fn builder() -> LockManagerBuilder {
        LockManagerBuilder::default()
    }

    pub(crate) fn from_shared(shared: Shared) -> LockManager {
        LockManager {
            shared: Arc::new(shared),
        }
    }
}
