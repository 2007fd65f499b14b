//! How a lock layer or middleware treats each request ([`RequestOptions`]: the lock options, how
//! long it waits, how many may wait, what a lost lease does, how long the locks are kept), and the
//! [`Policy`](super::policy::Policy) that adds a web stack's custom rejection response to them.

use std::sync::Arc;
use std::time::Duration;

use super::acquire::WaitCounts;
use super::metrics;
use super::reject::{RejectReason, Rejection};
use crate::manager::LockOwner;
use crate::options::{LockOptions, Mode};

/// The default wait timeout of a layer: long enough for a queue of short handlers, short enough that
/// a client is told "try again" before it gives up on its own.
pub const DEFAULT_WAIT_TIMEOUT: Duration = Duration::from_secs(10);

/// The default `Retry-After` of rejections.
pub const DEFAULT_RETRY_AFTER: Duration = Duration::from_secs(1);

/// What the layer does when a request's lease is lost while its handler runs (the watchdog found the
/// lock gone or could not renew it, or a fixed lease ran out).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum OnLeaseLost {
    /// Let the handler finish; it can watch [`LockInfo::lost`](crate::LockInfo::lost) itself and should pass the fencing
    /// token to its storage. The default.
    #[default]
    Continue,
    /// Drop the handler's future at once (cancelling it at its next `.await`) and answer 503 (gRPC
    /// `ABORTED`). With [`LockLayer::hold_until_body_end`](crate::LockLayer::hold_until_body_end),
    /// a loss while the body streams ends the body with an error.
    Abort,
}

/// How a layer waits for a busy lock: for the request's locks together, as a set of locks waits.
pub(crate) use crate::manager::Wait;

/// How a [`LockLayer`](crate::LockLayer) or an actix-web `LockMiddleware` treats each request: the
/// mode and lease of its locks, how long it waits for them, how many requests may wait, what a lost
/// lease does, how long the locks are kept, and the `Retry-After` of its rejections.
///
/// Both web stacks take the same options, so one value can configure either. Four names meet
/// here:
///
/// | name | where | what it does |
/// |---|---|---|
/// | `request_options(RequestOptions)` | layer, middleware | replaces every option with these |
/// | `options(LockOptions)` | layer, middleware | [`RequestOptions::lock`]: mode, lease and (if set) wait of a [`LockOptions`] |
/// | [`lock`](Self::lock) | here | the same, on a `RequestOptions` value |
/// | `lock_options()` | here, layer, middleware | reads back the mode and lease each acquisition starts from |
///
/// The other builder methods of the layer and middleware have the names of the methods here and
/// delegate to them. Clones share the waiter count of [`max_waiters`](Self::max_waiters).
///
/// ```
/// use std::time::Duration;
/// use tower_lock::{key, LockLayer, LockManager, LockOptions, OnLeaseLost, RequestOptions};
///
/// let options = RequestOptions::new()
///     .lock(LockOptions::fair().wait_timeout(Duration::from_secs(5)))
///     .max_waiters(100)
///     .on_lease_lost(OnLeaseLost::Abort);
/// let layer = LockLayer::new(LockManager::memory(), key::pattern("/accounts/{id}"))
///     .request_options(options);
/// ```
#[derive(Clone)]
pub struct RequestOptions {
    /// Mode and lease (the wait timeout is set per request from `wait`).
    pub(crate) lock: LockOptions,
    /// The mode was chosen (else the default, fair, which a manager without fair locks, a
    /// quorum's, serves as exclusive).
    pub(crate) mode_chosen: bool,
    pub(crate) wait: Wait,
    pub(crate) on_lease_lost: OnLeaseLost,
    pub(crate) max_waiters: Option<(usize, Arc<WaitCounts>)>,
    pub(crate) hold_body: bool,
    pub(crate) retry_after: Duration,
    /// Methods that take read holds (every other method a write hold), when set.
    pub(crate) read_methods: Option<Arc<[Box<str>]>>,
    /// Each hold names its request (method and route) for `LockManager::inspect`.
    pub(crate) record_requests: bool,
}

impl Default for RequestOptions {
    fn default() -> Self {
        // every layer and middleware starts from here: its metrics get their help text
        metrics::describe();
        RequestOptions {
            lock: LockOptions::fair(),
            mode_chosen: false,
            wait: Wait::For(DEFAULT_WAIT_TIMEOUT),
            on_lease_lost: OnLeaseLost::Continue,
            max_waiters: None,
            hold_body: false,
            retry_after: DEFAULT_RETRY_AFTER,
            read_methods: None,
            record_requests: true,
        }
    }
}

impl From<LockOptions> for RequestOptions {
    /// The defaults, with the mode, the lease and (if set) the wait timeout of `opts`.
    fn from(opts: LockOptions) -> Self {
        RequestOptions::new().lock(opts)
    }
}

impl std::fmt::Debug for RequestOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RequestOptions")
            .field("lock", &self.lock)
            .field("mode_chosen", &self.mode_chosen)
            .field("wait", &self.wait)
            .field("on_lease_lost", &self.on_lease_lost)
            .field(
                "max_waiters",
                &self.max_waiters.as_ref().map(|(max, _)| max),
            )
            .field("hold_body", &self.hold_body)
            .field("retry_after", &self.retry_after)
            .field("read_methods", &self.read_methods)
            .finish()
    }
}

impl RequestOptions {
    /// The defaults: fair locks kept by the manager's watchdog (exclusive ones on a quorum
    /// manager, which has no fair locks), a wait of at most
    /// [`DEFAULT_WAIT_TIMEOUT`], no limit on waiters, locks released when the response head is
    /// ready, the handler left running if its lease is lost, `Retry-After: 1`.
    pub fn new() -> Self {
        RequestOptions::default()
    }

    /// Take the mode, the lease and the ceiling (`max_hold`) from `opts`, and its wait timeout
    /// if it sets one.
    ///
    /// A request never waits forever by accident: without a timeout in `opts` the default of
    /// 10 s stays; call [`wait_forever`](Self::wait_forever) to mean it. With
    /// [`read_methods`](Self::read_methods) set, before or after, the mode of `opts` is not used:
    /// each request takes a read or a write hold by its method.
    pub fn lock(mut self, opts: LockOptions) -> Self {
        if let Some(timeout) = opts.wait_timeout_value() {
            self.wait = Wait::For(timeout);
        }
        self.lock = opts.wait_forever();
        self.mode_chosen = true;
        self
    }

    /// The lock mode: fair (FIFO, the default), exclusive, or a shared mode (read, write,
    /// semaphore; see [`read_methods`](Self::read_methods) for read/write by method).
    ///
    /// Fair is the default because requests for one resource expect their turn: on a hot key an
    /// exclusive lock serves no more requests, and its slowest requests wait longer (the figures
    /// are in BENCHMARKS.md). Exclusive and fair requests share one lock, so a job taking a key
    /// with the direct API's default (exclusive) and a layer taking it fairly exclude each other.
    /// [`read_methods`](Self::read_methods), set before or after, overrides this mode.
    pub fn mode(mut self, mode: Mode) -> Self {
        self.lock = self.lock.mode(mode);
        self.mode_chosen = true;
        self
    }

    /// Take a read hold for requests whose method is one of `methods`, and a write hold for every
    /// other method.
    ///
    /// Each key is then one fair read/write lock: reads of a resource run together, a write runs
    /// alone, and a write is never starved by a stream of reads (FIFO across both). This sets the
    /// mode of each request: it overrides [`mode`](Self::mode) and the mode of
    /// [`lock`](Self::lock) (the layer's `options`), whichever order they are called in; their
    /// lease and wait still apply. Methods compare case-insensitively.
    ///
    /// ```
    /// use tower_lock::{key, LockLayer, LockManager};
    ///
    /// let layer = LockLayer::new(LockManager::memory(), key::pattern("/docs/{id}"))
    ///     .read_methods(["GET", "HEAD"]);
    /// ```
    pub fn read_methods<I, S>(mut self, methods: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let methods = methods.into_iter();
        let upper = methods.map(|method| method.as_ref().to_ascii_uppercase().into_boxed_str());
        self.read_methods = Some(upper.collect());
        self.mode_chosen = true;
        self
    }

    /// These options for a request of `method`: with [`read_methods`](Self::read_methods) set,
    /// a read or a write hold.
    pub(crate) fn for_method(mut self, method: &str) -> Self {
        if let Some(read_methods) = &self.read_methods {
            let read = read_methods.iter().any(|m| m.eq_ignore_ascii_case(method));
            self.lock = self.lock.mode(if read { Mode::Read } else { Mode::Write });
        }
        self
    }

    /// `owner` named for a request of `method` to `route` (its matched route, else its path),
    /// unless [`record_requests`](Self::record_requests) is off.
    pub(crate) fn owner_for(&self, owner: LockOwner, method: &str, route: &str) -> LockOwner {
        if !self.record_requests {
            return owner;
        }
        owner.request(format!("{method} {route}"))
    }

    /// Whether each hold names the request that took it, as
    /// [`LockManager::inspect`](crate::LockManager::inspect) shows it: its method and matched
    /// route (axum's `MatchedPath`, actix-web's match pattern), else its path; never its query
    /// string or headers. On by default: "which request holds account 42" is the first question
    /// when one hangs. Turn it off when even a path must not leave the process.
    pub fn record_requests(mut self, record: bool) -> Self {
        self.record_requests = record;
        self
    }

    /// Wait at most `timeout` for a busy lock (all the locks of a request together), then answer
    /// 503 with `Retry-After`. Default [`DEFAULT_WAIT_TIMEOUT`].
    pub fn wait_timeout(mut self, timeout: Duration) -> Self {
        self.wait = Wait::For(timeout);
        self
    }

    /// Wait as long as it takes (a gRPC deadline still caps the wait).
    pub fn wait_forever(mut self) -> Self {
        self.wait = Wait::Forever;
        self
    }

    /// Try mode: never wait. A request whose lock is busy is answered 409 Conflict with
    /// `Retry-After` (gRPC `ABORTED`) at once.
    pub fn no_wait(mut self) -> Self {
        self.wait = Wait::Never;
        self
    }

    /// Hold each lock for a fixed `lease` instead of letting the manager's watchdog renew it.
    ///
    /// The lock frees itself `lease` after it was taken, whatever the handler does. Pair it with
    /// [`OnLeaseLost::Abort`] to stop handlers that outlive their lease.
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lock = self.lock.lease(lease);
        self
    }

    /// Let the manager's watchdog keep the leases (the default).
    pub fn watchdog_lease(mut self) -> Self {
        self.lock = self.lock.watchdog_lease();
        self
    }

    /// End each hold `max_hold` after it began, however long the watchdog could keep it (see
    /// [`LockOptions::max_hold`]).
    ///
    /// A handler that hangs holding its lock then loses it at `max_hold`: the watchdog stops
    /// renewing it, the server frees it, and the loss is handled as any lost lease, as
    /// [`on_lease_lost`](Self::on_lease_lost) says (with [`OnLeaseLost::Abort`] the handler is
    /// dropped and the request answered 503). A zero `max_hold` rejects every request (409,
    /// logged at WARN): it would lock nothing.
    pub fn max_hold(mut self, max_hold: Duration) -> Self {
        self.lock = self.lock.max_hold(max_hold);
        self
    }

    /// What to do when a lease is lost while the handler runs (default
    /// [`OnLeaseLost::Continue`]).
    ///
    /// With [`OnLeaseLost::Abort`] the handler's future is dropped and the request answered 503
    /// (gRPC `ABORTED`).
    pub fn on_lease_lost(mut self, on_lease_lost: OnLeaseLost) -> Self {
        self.on_lease_lost = on_lease_lost;
        self
    }

    /// Let at most `max` requests of this process wait for the same lock; more are answered at
    /// once with 503 and `Retry-After` (gRPC `UNAVAILABLE`).
    ///
    /// The count is shared by every clone of these options, and of the layer or middleware that
    /// holds them: build it once and clone it, so that every worker counts against the same limit.
    /// A request that finds its lock free never counts. Default: no limit.
    pub fn max_waiters(mut self, max: usize) -> Self {
        self.max_waiters = Some((max, Arc::new(WaitCounts::default())));
        self
    }

    /// Keep the locks until the response body has been sent (or fails, or is dropped), not only
    /// until the response head is ready.
    ///
    /// For handlers that stream what they read under the lock.
    pub fn hold_until_body_end(mut self) -> Self {
        self.hold_body = true;
        self
    }

    /// The `Retry-After` of rejections that invite a retry (default [`DEFAULT_RETRY_AFTER`]:
    /// 1 s; sent in whole seconds, rounded up).
    pub fn retry_after(mut self, after: Duration) -> Self {
        self.retry_after = after;
        self
    }

    /// The lock options each acquisition starts from: the mode and lease. The wait is kept
    /// apart (see [`wait_timeout`](Self::wait_timeout)); with [`read_methods`](Self::read_methods)
    /// each request's mode is read or write by its method instead of the mode returned here.
    pub fn lock_options(&self) -> LockOptions {
        self.lock
    }

    /// Give `rejection` these options' `Retry-After`, count it in the metrics and log it:
    /// everything but building the response, which is the web stack's.
    pub(crate) fn settle(&self, mut rejection: Rejection, grpc: bool) -> Rejection {
        rejection.set_context(self.retry_after, grpc);
        metrics::rejected(rejection.reason());
        // An outage is logged at WARN by the manager, once: a line per request would flood.
        match rejection.reason() {
            // a configuration to fix, or a fault to look at
            RejectReason::Failed | RejectReason::Conflict => {
                tracing::warn!(%rejection, "request rejected by the lock layer")
            }
            _ => tracing::debug!(%rejection, "request rejected by the lock layer"),
        }
        rejection
    }
}
