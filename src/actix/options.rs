//! The builder methods of [`LockMiddleware`], each setting one of its [`RequestOptions`].

use std::sync::Arc;
use std::time::Duration;

use super::LockMiddleware;
use crate::options::{LockOptions, Mode};
use crate::request::{OnLeaseLost, RequestOptions};

/// The options of [`RequestOptions`], set one at a time: each method sets the option of the same
/// name there.
impl<K> LockMiddleware<K> {
    fn with_options(mut self, change: impl FnOnce(RequestOptions) -> RequestOptions) -> Self {
        Arc::make_mut(&mut self.policy).set_options(change);
        self
    }

    /// Treat each request as `options` say, replacing every option set so far (the custom
    /// rejection response stays).
    pub fn request_options(self, options: RequestOptions) -> Self {
        self.with_options(|_| options)
    }

    /// Take the mode and the lease from `opts`, and its wait timeout if it sets one (without one
    /// the default of 10 s stays): see [`RequestOptions::lock`].
    /// [`read_methods`](Self::read_methods), set before or after, overrides its mode.
    pub fn options(self, opts: LockOptions) -> Self {
        self.with_options(|options| options.lock(opts))
    }

    /// The lock mode (fair by default; exclusive, read, write, semaphore): see
    /// [`RequestOptions::mode`].
    pub fn mode(self, mode: Mode) -> Self {
        self.with_options(|options| options.mode(mode))
    }

    /// Read holds for requests of `methods`, write holds for the others, of one read/write lock
    /// per key: see [`RequestOptions::read_methods`]. It overrides the mode of
    /// [`options`](Self::options) and [`mode`](Self::mode), whichever order they are called in.
    pub fn read_methods<I, S>(self, methods: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        self.with_options(|options| options.read_methods(methods))
    }

    /// Wait at most `timeout` for a busy lock, then answer 503 with `Retry-After`: see
    /// [`RequestOptions::wait_timeout`].
    pub fn wait_timeout(self, timeout: Duration) -> Self {
        self.with_options(|options| options.wait_timeout(timeout))
    }

    /// Wait as long as it takes: see [`RequestOptions::wait_forever`].
    pub fn wait_forever(self) -> Self {
        self.with_options(RequestOptions::wait_forever)
    }

    /// Try mode: never wait, answer 409 with `Retry-After` when a lock is busy: see
    /// [`RequestOptions::no_wait`].
    pub fn no_wait(self) -> Self {
        self.with_options(RequestOptions::no_wait)
    }

    /// Hold each lock for a fixed `lease`, not renewed: see [`RequestOptions::lease`].
    pub fn lease(self, lease: Duration) -> Self {
        self.with_options(|options| options.lease(lease))
    }

    /// Let the manager's watchdog keep the leases (the default): see
    /// [`RequestOptions::watchdog_lease`].
    pub fn watchdog_lease(self) -> Self {
        self.with_options(RequestOptions::watchdog_lease)
    }

    /// End each hold `max_hold` after it began, however long the watchdog could keep it: see
    /// [`RequestOptions::max_hold`].
    pub fn max_hold(self, max_hold: Duration) -> Self {
        self.with_options(|options| options.max_hold(max_hold))
    }

    /// What to do when a lease is lost while the handler runs: see
    /// [`RequestOptions::on_lease_lost`].
    pub fn on_lease_lost(self, on_lease_lost: OnLeaseLost) -> Self {
        self.with_options(|options| options.on_lease_lost(on_lease_lost))
    }

    /// Let at most `max` requests of this process wait for the same lock through this middleware and
    /// its clones: see [`RequestOptions::max_waiters`].
    pub fn max_waiters(self, max: usize) -> Self {
        self.with_options(|options| options.max_waiters(max))
    }

    /// Keep the locks until the response body ends: see
    /// [`RequestOptions::hold_until_body_end`].
    pub fn hold_until_body_end(self) -> Self {
        self.with_options(RequestOptions::hold_until_body_end)
    }

    /// The `Retry-After` of rejections that invite a retry: see [`RequestOptions::retry_after`].
    pub fn retry_after(self, after: Duration) -> Self {
        self.with_options(|options| options.retry_after(after))
    }

    /// The mode and lease each acquisition starts from (the wait is the middleware's own): see
    /// [`RequestOptions::lock_options`].
    pub fn lock_options(&self) -> LockOptions {
        self.policy.options.lock_options()
    }
}
