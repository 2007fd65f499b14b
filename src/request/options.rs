//! How a lock layer or middleware treats each request: the lock options, how long it waits, how
//! many may wait, what a lost lease does, how long the locks are kept, and how it rejects.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

use super::acquire::WaitCounts;
use super::metrics;
use super::reject::{RejectReason, Rejection};
use crate::options::LockOptions;

/// A custom rejection response.
pub(crate) type RejectFn = Arc<dyn Fn(&Rejection) -> http::Response<Bytes> + Send + Sync>;

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
    /// Let the handler finish; it can watch [`LockInfo::lost`] itself and should pass the fencing
    /// token to its storage. The default.
    #[default]
    Continue,
    /// Drop the handler's future at once (cancelling it at its next `.await`) and answer 503 (gRPC
    /// `ABORTED`). With [`LockLayer::hold_until_body_end`](crate::LockLayer::hold_until_body_end),
    /// a loss while the body streams ends the body with an error.
    Abort,
}

/// How a layer waits for a busy lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wait {
    For(Duration),
    Forever,
    /// Try mode: never wait.
    Never,
}

/// The options of one layer, shared by every service it makes.
#[derive(Clone)]
pub(crate) struct Policy {
    /// Mode and lease (the wait timeout is set per request from `wait`).
    pub(crate) lock: LockOptions,
    pub(crate) wait: Wait,
    pub(crate) on_lease_lost: OnLeaseLost,
    pub(crate) max_waiters: Option<(usize, Arc<WaitCounts>)>,
    pub(crate) hold_body: bool,
    pub(crate) retry_after: Duration,
    pub(crate) reject: Option<RejectFn>,
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            lock: LockOptions::exclusive(),
            wait: Wait::For(DEFAULT_WAIT_TIMEOUT),
            on_lease_lost: OnLeaseLost::Continue,
            max_waiters: None,
            hold_body: false,
            retry_after: DEFAULT_RETRY_AFTER,
            reject: None,
        }
    }
}

impl std::fmt::Debug for Policy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Policy")
            .field("lock", &self.lock)
            .field("wait", &self.wait)
            .field("on_lease_lost", &self.on_lease_lost)
            .field(
                "max_waiters",
                &self.max_waiters.as_ref().map(|(max, _)| max),
            )
            .field("hold_body", &self.hold_body)
            .field("retry_after", &self.retry_after)
            .field("custom_reject", &self.reject.is_some())
            .finish()
    }
}

impl Policy {
    /// The response for `rejection`, counted in the metrics.
    pub(crate) fn respond(&self, rejection: Rejection, grpc: bool) -> http::Response<Bytes> {
        let rejection = self.settle(rejection, grpc);
        match &self.reject {
            Some(reject) => reject(&rejection),
            None => rejection.default_response(),
        }
    }

    /// Give `rejection` this layer's `Retry-After`, count it in the metrics and log it: everything
    /// but building the response, which is the web stack's (the actix adapter builds its own).
    pub(crate) fn settle(&self, mut rejection: Rejection, grpc: bool) -> Rejection {
        rejection.set_context(self.retry_after, grpc);
        metrics::rejected(rejection.reason());
        match rejection.reason() {
            RejectReason::Unavailable | RejectReason::Failed => {
                tracing::warn!(%rejection, "request rejected by the lock layer");
            }
            _ => tracing::debug!(%rejection, "request rejected by the lock layer"),
        }
        rejection
    }
}

/// The per-layer options shared by [`LockLayer`](crate::LockLayer) and the actix-web middleware:
/// both keep an `Arc<Policy>` in a field named `policy`, and get the same builder methods.
macro_rules! policy_options {
    () => {
        fn with(mut self, change: impl FnOnce(&mut $crate::request::Policy)) -> Self {
            change(::std::sync::Arc::make_mut(&mut self.policy));
            self
        }

        /// Take the mode and the lease from `opts`, and its wait timeout if it sets one (a request
        /// never waits forever by accident: without a timeout in `opts` the default of 10 s
        /// stays; call [`wait_forever`](Self::wait_forever) to mean it).
        pub fn options(self, opts: $crate::LockOptions) -> Self {
            self.with(|policy| {
                if let Some(timeout) = opts.wait_timeout_value() {
                    policy.wait = $crate::request::Wait::For(timeout);
                }
                policy.lock = opts.wait_forever();
            })
        }

        /// Exclusive (the default) or fair (FIFO) locks.
        pub fn mode(self, mode: $crate::Mode) -> Self {
            self.with(|policy| policy.lock = policy.lock.mode(mode))
        }

        /// Wait at most `timeout` for a busy lock (all the locks of a request together), then
        /// answer 503 with `Retry-After`. Default
        /// [`DEFAULT_WAIT_TIMEOUT`](crate::request::DEFAULT_WAIT_TIMEOUT).
        pub fn wait_timeout(self, timeout: ::std::time::Duration) -> Self {
            self.with(|policy| policy.wait = $crate::request::Wait::For(timeout))
        }

        /// Wait as long as it takes (a gRPC deadline still caps the wait).
        pub fn wait_forever(self) -> Self {
            self.with(|policy| policy.wait = $crate::request::Wait::Forever)
        }

        /// Try mode: never wait. A request whose lock is busy is answered 409 Conflict with
        /// `Retry-After` (gRPC `ABORTED`) at once.
        pub fn no_wait(self) -> Self {
            self.with(|policy| policy.wait = $crate::request::Wait::Never)
        }

        /// Hold each lock for a fixed `lease` instead of letting the manager's watchdog renew it:
        /// the lock frees itself `lease` after it was taken, whatever the handler does. Pair it
        /// with [`OnLeaseLost::Abort`](crate::OnLeaseLost::Abort) to stop handlers that outlive
        /// their lease.
        pub fn lease(self, lease: ::std::time::Duration) -> Self {
            self.with(|policy| policy.lock = policy.lock.lease(lease))
        }

        /// Let the manager's watchdog keep the leases (the default).
        pub fn watchdog_lease(self) -> Self {
            self.with(|policy| policy.lock = policy.lock.watchdog_lease())
        }

        /// What to do when a lease is lost while the handler runs (default
        /// [`OnLeaseLost::Continue`](crate::OnLeaseLost::Continue)). With
        /// [`OnLeaseLost::Abort`](crate::OnLeaseLost::Abort) the handler's future is dropped and
        /// the request answered 503 (gRPC `ABORTED`).
        pub fn on_lease_lost(self, on_lease_lost: $crate::OnLeaseLost) -> Self {
            self.with(|policy| policy.on_lease_lost = on_lease_lost)
        }

        /// Let at most `max` requests of this process wait for the same lock through this
        /// layer (and its clones: build it once and clone it, so every worker counts against the
        /// same limit); more are answered at once with 503 and `Retry-After` (gRPC
        /// `UNAVAILABLE`). A request that finds its lock free never counts. Default: no limit.
        pub fn max_waiters(self, max: usize) -> Self {
            self.with(|policy| {
                let counts = ::std::sync::Arc::new($crate::request::WaitCounts::default());
                policy.max_waiters = Some((max, counts))
            })
        }

        /// Keep the locks until the response body has been sent (or fails, or is dropped), not
        /// only until the response head is ready: for handlers that stream what they read under
        /// the lock.
        pub fn hold_until_body_end(self) -> Self {
            self.with(|policy| policy.hold_body = true)
        }

        /// The `Retry-After` of rejections that invite a retry (default
        /// [`DEFAULT_RETRY_AFTER`](crate::request::DEFAULT_RETRY_AFTER): 1 s; sent in whole
        /// seconds, rounded up).
        pub fn retry_after(self, after: ::std::time::Duration) -> Self {
            self.with(|policy| policy.retry_after = after)
        }

        /// The lock options each acquisition uses (mode and lease; the wait is the layer's).
        pub fn lock_options(&self) -> $crate::LockOptions {
            self.policy.lock
        }
    };
}
pub(crate) use policy_options;
