//! `LockManager`: the one engine of a process. It owns the backend, the local waiters, the lease table
//! and the watchdog task; `LockOwner` gives requests re-entry.

mod acquire;
mod all;
mod builder;
mod closing;
mod cohort;
mod cohort_requests;
mod election;
mod entry;
mod force;
mod guard;
mod inspect;
mod limits;
mod live;
mod open;
mod outage;
mod owner;
mod ping;
mod read_group;
mod read_group_requests;
mod record;
mod refusal;
mod run_once;
#[cfg(all(test, tower_lock_shuttle))]
mod schedules;
mod shutdown;
mod ticket;
mod turns;
mod wait_ages;
mod watchdog_task;

use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::oneshot;

pub use all::LockGuards;
pub(crate) use all::{take_in_order, Wait};
pub use builder::{
    LockManagerBuilder, DEFAULT_COMMAND_TIMEOUT, DEFAULT_NODE_TIMEOUT, DEFAULT_TAKEOVER_GRACE,
};
pub use election::{Leader, LeaderWatch, Leadership};
pub(crate) use guard::Releaser;
pub use guard::{LockGuard, LockInfo};
pub use inspect::DEFAULT_LIST_LIMIT;
pub use owner::LockOwner;
pub use run_once::{JobHandle, JobRun, JobSchedule};

use closing::Closing;
use cohort::Cohorts;
use live::{fixed_holds, LiveHolds};
use outage::Outage;
use read_group::ReadGroups;
use turns::Turns;
use wait_ages::wait_age_report;
use watchdog_task::WatchdogTask;

use crate::backend::{Backend, InboxStop, Readiness, Wiring};
use crate::background::{Background, BackgroundQueue};
use crate::error::LockError;
use crate::inbox_proof::InboxProof;
use crate::options::{LockOptions, Mode};
use crate::waiters::WaitRegistry;
use crate::watchdog::{Claims, Leases, Queued, Watchdog};

/// The default watchdog lease.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(30);

/// The default eviction deadline of a queued fair waiter that stopped heartbeating (its process
/// died); also the claim lease a fair grant starts with.
pub const DEFAULT_FAIR_EVICTION: Duration = Duration::from_secs(5);

/// The lock engine of one process: share one (it is cheap to clone) across every request.
///
/// It owns the backend's command pool, exactly one pub/sub connection that carries every wake-up for
/// every waiting request (Redis), and one watchdog task that renews every held lease.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), tower_lock::LockError> {
/// use std::time::Duration;
/// use tower_lock::{LockManager, LockOptions};
///
/// let manager = LockManager::memory();
/// let opts = LockOptions::exclusive().wait_timeout(Duration::from_secs(5));
/// let guard = manager.acquire("account:42", &opts).await?;
/// // a second request for the same account is refused while the first holds it
/// assert!(manager.try_acquire("account:42", &opts).await?.is_none());
/// drop(guard);
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct LockManager {
    shared: Arc<Shared>,
}

/// Timing settings of one manager.
#[derive(Debug, Clone)]
pub(crate) struct Timing {
    pub(crate) lease: Duration,
    pub(crate) eviction: Duration,
    /// Local hand-offs of a cohort in a row (see `cohort.rs`).
    pub(crate) handoffs: u32,
    /// This process's name in lock states (`LockManagerBuilder::label`).
    pub(crate) label: Arc<str>,
}

/// What the manager, its owners and its guards share.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) backend: Arc<Backend>,
    pub(crate) waiters: Arc<WaitRegistry>,
    pub(crate) leases: Arc<Leases>,
    /// Requests queued for fair locks (heartbeat by the watchdog).
    pub(crate) queued: Arc<Queued>,
    /// Fair grants whose claim lease the watchdog extends.
    pub(crate) claims: Arc<Claims>,
    /// Where work whose caller went away is finished (by the watchdog task).
    pub(crate) background: Background,
    /// The watchdog lease.
    pub(crate) lease: Duration,
    /// The claim lease a fair grant starts with (the fair eviction deadline): valid for that long
    /// until the watchdog extends it.
    pub(crate) claim: Duration,
    /// Random id of this manager; owner ids extend it.
    pub(crate) id: Arc<str>,
    /// This process's name in lock states, sent with each acquisition.
    pub(crate) label: Arc<str>,
    next_owner: AtomicU64,
    /// The watchdog task (spawned on first use).
    watchdog: WatchdogTask,
    /// Dropping this stops the inbox tasks.
    inbox_stop: Mutex<Option<InboxStop>>,
    /// Closed by the shutdown; counts the acquisitions running.
    closing: Closing,
    /// The holds of the live guards (the shutdown releases them).
    live: Arc<LiveHolds>,
    /// The attempts of each owner on each lock, one at a time.
    turns: Arc<Turns>,
    /// Whether the backend is known unreachable (for logging an outage once).
    outage: Outage,
    /// The exclusive requests of this process, by lock, in front of the backend.
    cohorts: Arc<Cohorts>,
    /// The read requests of this process, by lock, sharing read holds of the backend.
    read_groups: Arc<ReadGroups>,
    /// The servers a readiness probe asks.
    ready: Arc<Readiness>,
    /// What the inbox proves of its subscription: the takeover deadline of every hold counts
    /// from it, but on a cluster (takeover off: it proves nothing, and no hold counts on it).
    inbox_proof: Arc<InboxProof>,
}

impl Shared {
    pub(crate) fn new(
        backend: Arc<Backend>,
        wiring: Wiring,
        queue: BackgroundQueue,
        timing: Timing,
        inbox_stop: Option<InboxStop>,
    ) -> Self {
        let leases = Arc::new(Leases::default());
        let live = Arc::new(LiveHolds::default());
        let queued = Arc::new(Queued::default());
        let claims = Arc::new(Claims::default());
        let cohorts = Arc::new(Cohorts::new(timing.handoffs));
        let read_groups = Arc::new(ReadGroups::new(timing.handoffs));
        crate::telemetry::describe();
        let (stop, stopped) = oneshot::channel();
        let watchdog = Watchdog {
            backend: backend.clone(),
            leases: leases.clone(),
            lease: timing.lease,
            queued: queued.clone(),
            claims: claims.clone(),
            waiters: wiring.waiters.clone(),
            eviction: timing.eviction,
            recheck: wiring.reconnected.clone(),
            stopped,
            outages: wiring.outages.clone(),
            probes: wiring.inbox_proof.grace().is_some(),
            fixed: fixed_holds(&live),
            wait_ages: wait_age_report(
                wiring.waiters.clone(),
                cohorts.clone(),
                read_groups.clone(),
            ),
        };
        Shared {
            ready: wiring.ready,
            backend,
            waiters: wiring.waiters,
            leases,
            queued,
            claims,
            background: wiring.background,
            lease: timing.lease,
            claim: timing.eviction,
            id: wiring.manager_id,
            label: timing.label,
            next_owner: AtomicU64::new(1),
            watchdog: WatchdogTask::new(watchdog, queue, stop),
            inbox_stop: Mutex::new(inbox_stop),
            closing: Closing::default(),
            live,
            turns: Arc::default(),
            outage: Outage::new(wiring.outages.clone()),
            cohorts,
            read_groups,
            inbox_proof: wiring.inbox_proof,
        }
    }

    /// The proofs the takeover deadline of a hold of `id` counts from: the inbox's, or on a
    /// cluster those of the channel of the lock's slot.
    pub(crate) fn inbox_proof_of(&self, id: &crate::waiters::LockId) -> Arc<InboxProof> {
        (self.backend.slot_proof(id)).unwrap_or_else(|| self.inbox_proof.clone())
    }

    /// Spawn the watchdog task on first use, inside the caller's runtime.
    pub(crate) fn start(&self) {
        self.watchdog.start();
    }

    fn lock_inbox_stop(&self) -> MutexGuard<'_, Option<InboxStop>> {
        self.inbox_stop.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl LockManager {
    /// A new owner: every lock it takes can be re-entered through it (or its clones). One per request.
    pub fn owner(&self) -> LockOwner {
        LockOwner::new(self.shared.new_owner_id(), self.clone())
    }

    /// Wait for the lock `key` (until `opts`' wait timeout, forever by default) and hold it.
    /// Each call is a fresh owner: a second `acquire` of the same key waits for the first guard.
    pub async fn acquire(&self, key: &str, opts: &LockOptions) -> Result<LockGuard, LockError> {
        self.owner().acquire(key, opts).await
    }

    /// Take the lock `key` if it is free, without waiting. `Ok(None)` means someone else holds it;
    /// an unreachable backend is an error, never `None`.
    pub async fn try_acquire(
        &self,
        key: &str,
        opts: &LockOptions,
    ) -> Result<Option<LockGuard>, LockError> {
        self.owner().try_acquire(key, opts).await
    }

    /// This manager's random id, the prefix of its owners' ids.
    ///
    /// Redis shows it: every connection the manager opens is named `tower-lock:<id>` in
    /// `CLIENT LIST`. Logs can use it to tell the replicas apart.
    pub fn id(&self) -> &str {
        &self.shared.id
    }

    /// The watchdog lease of this manager.
    pub fn lease(&self) -> Duration {
        self.shared.lease
    }

    /// Requests of this process waiting for a lock right now. A request whose owner already waits
    /// for the same lock through another request is counted once that one is done: it waits
    /// behind it, then re-enters the lock or waits in its own turn.
    pub fn waiting(&self) -> usize {
        let shared = &self.shared;
        shared.waiters.len() + shared.cohorts.waiting() + shared.read_groups.waiting()
    }

    /// Requests of this process queued for fair and shared locks right now (each heartbeat by the
    /// watchdog).
    pub fn queued(&self) -> usize {
        self.shared.queued.len()
    }

    /// Whether this manager serves fair locks (a quorum's does not).
    pub(crate) fn has_fair_locks(&self) -> bool {
        self.shared.backend.unsupported(Mode::Fair).is_none()
    }

    /// Refuse options this manager's backend cannot serve (fair locks on a quorum), and a zero
    /// ceiling (a hold that ends as it begins locks nothing).
    fn supports(&self, key: &str, opts: &LockOptions) -> Result<(), LockError> {
        let unsupported = match self.shared.backend.unsupported(opts.mode_value()) {
            _ if opts.max_hold_value() == Some(Duration::ZERO) => ZERO_MAX_HOLD,
            Some(what) => what,
            None => return Ok(()),
        };
        Err(LockError::Unsupported {
            key: key.to_owned(),
            what: unsupported.to_owned(),
        })
    }

    /// Leave cleanly: release every lock still held, leave every queue, finish the background
    /// releases, and stop the inbox and the watchdog. Call it from the server's graceful-shutdown
    /// hook: the locks of this process are then free for the other replicas at once, not after a
    /// lease. Afterwards `acquire` and `try_acquire` fail at once with [`LockError::Closed`], and
    /// guards still alive are lost (their `release` returns [`LockError::NotHeld`]). Returns the
    /// first release that failed (that lock frees itself when its lease ends); a second call does
    /// nothing.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), tower_lock::LockError> {
    /// use tower_lock::{LockError, LockManager, LockOptions};
    ///
    /// let manager = LockManager::memory();
    /// let guard = manager.acquire("account:42", &LockOptions::exclusive()).await?;
    /// manager.shutdown().await?;
    /// assert!(guard.is_lost());
    /// let refused = manager.acquire("account:42", &LockOptions::exclusive()).await;
    /// assert!(matches!(refused, Err(LockError::Closed)));
    /// # Ok(())
    /// # }
    /// ```
    pub async fn shutdown(&self) -> Result<(), LockError> {
        self.shared.shutdown().await
    }

    /// Leases the watchdog keeps right now.
    pub fn held(&self) -> usize {
        self.shared.leases.len()
    }
}

/// Why a zero `max_hold` is refused.
const ZERO_MAX_HOLD: &str = "a max_hold of zero would end the hold as it begins";

pub(crate) fn new_manager_id() -> Arc<str> {
    Arc::from(uuid::Uuid::new_v4().simple().to_string())
}
