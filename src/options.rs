//! Per-acquisition options: the lock mode, how long to wait, and how the lease is kept.

use std::time::Duration;

/// How a lock is shared and how it orders its waiters.
///
/// A lock takes one family of modes at a time (exclusive and fair, read/write, semaphore): while it
/// is held or waited for in one, a request of another fails with [`crate::LockError::Unsupported`]
/// (neither would see the other's holders or waiters). Exclusive and fair requests share one lock,
/// and so do read and write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Mode {
    /// Reentrant exclusive lock (Redisson's `RLock`): one owner at a time, waiters are not ordered
    /// (a freed lock goes to whichever request asks first). The wait is bounded all the same: a
    /// request that finds the lock busy again after a wake-up has lost a race, and queues in fair
    /// order (except on a quorum, which has no fair queue). So does a request that finds fair
    /// requests queued, or the lock held in fair mode: exclusive and fair requests share one
    /// lock. Use [`Mode::Fair`] when order always matters. On Redis, the requests of one process
    /// hand the lock to each other in memory, a few times in a row, before it goes back to Redis
    /// (lock cohorting: see [`LockManagerBuilder::local_handoffs`](crate::LockManagerBuilder::local_handoffs)).
    #[default]
    Exclusive,
    /// Reentrant fair lock: waiters acquire in the order they arrived at the backend. A lock held
    /// in exclusive mode is waited for in the same order: its release grants it to the first
    /// waiter. The default of [`LockLayer`](crate::LockLayer).
    Fair,
    /// A read hold of a fair read/write lock: any number of read holds at once, never with a
    /// write hold. A read that arrives after a queued write waits behind it, so writers never
    /// starve; reads queued one after another are granted together.
    Read,
    /// The write hold of a fair read/write lock: alone, after every earlier read and write.
    Write,
    /// One of `n` permits of a fair semaphore: at most `n` holds of the lock at once, granted in
    /// order of arrival. Every request of one lock should name the same `n`.
    Semaphore(u32),
}

impl Mode {
    /// Whether waiters queue in order and are granted the lock by its release (every mode but
    /// exclusive).
    pub(crate) fn is_queued(self) -> bool {
        self != Mode::Exclusive
    }

    /// Whether holds of the lock may overlap (read/write and semaphore locks).
    pub(crate) fn is_shared(self) -> bool {
        matches!(self, Mode::Read | Mode::Write | Mode::Semaphore(_))
    }

    /// The mode's name in errors, logs and metrics.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Mode::Exclusive => "exclusive",
            Mode::Fair => "fair",
            Mode::Read => "read",
            Mode::Write => "write",
            Mode::Semaphore(_) => "semaphore",
        }
    }
}

/// How long a held lock stays valid without its holder.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Lease {
    /// The manager's watchdog renews the lease every lease/3 until the guard is released; if the
    /// process dies, the lock frees itself one lease period later.
    #[default]
    Watchdog,
    /// A fixed lease: the lock frees itself this long after it was acquired, whatever the holder
    /// does. The guard counts it from the start of the acquisition; Redis is asked to keep the
    /// lock 1% + 2 ms longer, so that a server clock running fast cannot free it first.
    Fixed(Duration),
}

/// Options for one acquisition: mode, wait timeout and lease.
///
/// ```
/// use std::time::Duration;
/// use tower_lock::LockOptions;
///
/// let opts = LockOptions::exclusive()
///     .wait_timeout(Duration::from_secs(5))
///     .lease(Duration::from_secs(10));
/// assert_eq!(opts.wait_timeout_value(), Some(Duration::from_secs(5)));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LockOptions {
    mode: Mode,
    wait_timeout: Option<Duration>,
    lease: Lease,
    cohort_order: bool,
    max_hold: Option<Duration>,
}

impl LockOptions {
    /// The longest lease a lock takes (365 days): a longer fixed lease is lowered to it, and a
    /// longer manager lease or fair eviction is refused when the manager is built. A lock whose
    /// holder died frees itself within this much; and every clock the lease meets (the monotonic
    /// clock, Redis's expiry in milliseconds, Lua's numbers) holds it with room to spare.
    pub const MAX_LEASE: Duration = Duration::from_secs(365 * 24 * 60 * 60);

    /// A reentrant exclusive lock that waits forever and is kept by the watchdog.
    pub fn exclusive() -> Self {
        Self::default()
    }

    /// A reentrant fair (FIFO) lock that waits forever and is kept by the watchdog.
    pub fn fair() -> Self {
        Self {
            mode: Mode::Fair,
            ..Self::default()
        }
    }

    /// A read hold of a fair read/write lock (see [`Mode::Read`]), waiting forever, kept by the
    /// watchdog.
    pub fn read() -> Self {
        Self::exclusive().mode(Mode::Read)
    }

    /// The write hold of a fair read/write lock (see [`Mode::Write`]), waiting forever, kept by
    /// the watchdog.
    pub fn write() -> Self {
        Self::exclusive().mode(Mode::Write)
    }

    /// One of `permits` holds of a fair semaphore (see [`Mode::Semaphore`]), waiting forever, kept
    /// by the watchdog. Zero is raised to one.
    pub fn semaphore(permits: u32) -> Self {
        Self::exclusive().mode(Mode::Semaphore(permits.max(1)))
    }

    /// Give up waiting after `timeout` with [`crate::LockError::Timeout`]. The default for the direct
    /// API is to wait forever (a backend failure still ends the wait with an error). A timeout
    /// too long for the clock to reach (`Duration::MAX`) waits forever; a zero timeout makes one
    /// attempt, like `try_acquire`, and ends with `Timeout` if the lock is busy.
    pub fn wait_timeout(mut self, timeout: Duration) -> Self {
        self.wait_timeout = Some(timeout);
        self
    }

    /// Wait forever (the default for the direct API).
    pub fn wait_forever(mut self) -> Self {
        self.wait_timeout = None;
        self
    }

    /// Hold the lock for a fixed lease with no watchdog renewal: it frees itself `lease` after it was
    /// acquired. Zero is raised to one millisecond, and a lease over [`MAX_LEASE`](Self::MAX_LEASE)
    /// (`Duration::MAX` included) is lowered to it: a lease that long means "until released", and
    /// a process that dies holding it still frees the lock one day.
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = Lease::Fixed(lease.clamp(Duration::from_millis(1), Self::MAX_LEASE));
        self
    }

    /// Let the manager's watchdog keep the lease (the default).
    pub fn watchdog_lease(mut self) -> Self {
        self.lease = Lease::Watchdog;
        self
    }

    /// End the hold `max_hold` after it began, however long the watchdog could keep it: a ceiling
    /// for a holder that hangs.
    ///
    /// A watchdog lease is renewed for as long as its process lives, so a handler stuck on a
    /// dead connection would keep its lock forever. With a ceiling, the guard's `lost()` fires at
    /// `max_hold` (counted from the start of the acquisition that took the lock), the watchdog no
    /// longer renews it past that, and the server frees the lock at the same moment (plus the
    /// margin for a server clock running fast): each renewal is cut to end at the ceiling, and a
    /// `max_hold` shorter than the lease shortens the lease itself. A layer handles the loss as
    /// any lost lease (see [`OnLeaseLost`](crate::OnLeaseLost)).
    ///
    /// A fixed [`lease`](Self::lease) longer than `max_hold` is cut to it. A re-entry does not
    /// restart the ceiling: the owner's hold ends at the earliest ceiling its acquisitions asked
    /// for, each counted from the owner's first hold (a re-entry into a hold its owner shares
    /// with other requests of its process, through a cohort or a read group, counts its own from
    /// the re-entry, and only its guard is lost then). A request with a ceiling takes the lock in
    /// the backend itself, never handed on in memory by a cohort or a read group (their hold is
    /// shared by requests one after another, and a ceiling is one request's).
    ///
    /// Zero is refused when the lock is asked for ([`crate::LockError::Unsupported`]): it would
    /// lock nothing. `Duration::MAX` means no ceiling in practice (it saturates a century ahead).
    pub fn max_hold(mut self, max_hold: Duration) -> Self {
        self.max_hold = Some(max_hold);
        self
    }

    /// No ceiling on the hold (the default): the watchdog keeps it until it is released.
    pub fn no_max_hold(mut self) -> Self {
        self.max_hold = None;
        self
    }

    /// The ceiling of the hold (see [`max_hold`](Self::max_hold)); `None`: none.
    pub fn max_hold_value(&self) -> Option<Duration> {
        self.max_hold
    }

    /// The lease a hold with these options asks for: the manager's `watchdog` lease, or the fixed
    /// one, cut to the ceiling when there is one.
    pub(crate) fn held_lease(&self, watchdog: Duration) -> Duration {
        let lease = match self.lease {
            Lease::Watchdog => watchdog,
            Lease::Fixed(lease) => lease,
        };
        self.max_hold.map_or(lease, |max_hold| lease.min(max_hold))
    }

    /// Let a fair request be handed the lock in memory by another request of its process, ahead
    /// of requests of other processes that queued before it (lock cohorting, as exclusive
    /// requests always are: see
    /// [`LockManagerBuilder::local_handoffs`](crate::LockManagerBuilder::local_handoffs)).
    ///
    /// Without it a fair request is handed the lock in memory only when that keeps FIFO order:
    /// it found the lock held by a request of its process and nobody else queued in Redis.
    ///
    /// The trade: requests of one process still get the lock in their order of arrival, and the
    /// other processes' still in theirs, but a process may pass the lock among its own requests
    /// up to the manager's bound of hand-offs before the queue's next process gets its turn. In
    /// return a hand-off within the process costs no round trip. Every request of a lock should
    /// opt in, or none: one that does not waits in Redis's queue, behind those bursts.
    ///
    /// A read that opts in shares a read hold with the other reads of its process: they join it
    /// in memory while one of them takes or holds it, up to the bound, and it goes back to Redis
    /// with the last of them. A write of another process queued meanwhile waits for those reads
    /// too, at most the bound of them. A read of an owner that holds one this way may not ask to
    /// write (refused at once, as in Redis). Such a read's token rises against every write, but
    /// may be below that of a read another process took meanwhile: reads fence nothing between
    /// them.
    pub fn cohort_order(mut self) -> Self {
        self.cohort_order = true;
        self
    }

    /// Whether a fair request may be handed the lock in memory (see
    /// [`cohort_order`](Self::cohort_order)).
    pub fn cohort_order_value(&self) -> bool {
        self.cohort_order
    }

    /// Change the mode.
    pub fn mode(mut self, mode: Mode) -> Self {
        self.mode = mode;
        self
    }

    /// The mode.
    pub fn mode_value(&self) -> Mode {
        self.mode
    }

    /// The wait timeout; `None` waits forever.
    pub fn wait_timeout_value(&self) -> Option<Duration> {
        self.wait_timeout
    }

    /// The lease policy.
    pub fn lease_value(&self) -> Lease {
        self.lease
    }
}
