//! The acquisition of a request's locks, in sorted order, within the wait a request may spend and
//! the number of requests that may wait for one lock.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::grpc;
use super::guards::RequestGuards;
use super::metrics;
use super::options::{RequestOptions, Wait};
use super::reject::{RejectReason, Rejection};
use crate::key::LockKey;
use crate::manager::{take_in_order, LockGuard, LockOwner};
use crate::options::{LockOptions, Mode};

impl RequestOptions {
    /// Acquire every lock in `keys` (sorted, without duplicates) for `owner`, waiting at most until
    /// the layer's wait timeout or `cap` (a gRPC deadline), whichever is shorter.
    pub(crate) async fn acquire(
        mut self,
        owner: LockOwner,
        keys: Vec<LockKey>,
        cap: Option<Duration>,
    ) -> Result<RequestGuards, Rejection> {
        let _waiting = metrics::WaiterGauge::start();
        if !self.mode_chosen && !owner.manager().has_fair_locks() {
            self.lock = self.lock.mode(Mode::Exclusive);
        }
        let wait = match (self.wait, cap) {
            (Wait::Never, _) => Wait::Never,
            (Wait::For(timeout), Some(cap)) => Wait::For(timeout.min(cap)),
            (Wait::Forever, Some(cap)) => Wait::For(cap),
            (wait, None) => wait,
        };
        let take = |key, left| self.take_one(&owner, key, left);
        let guards = take_in_order(&keys, wait, take).await?;
        Ok(RequestGuards::new(guards))
    }

    /// Take one of a request's locks, waiting as long as `wait` allows.
    async fn take_one(
        &self,
        owner: &LockOwner,
        key: LockKey,
        wait: Wait,
    ) -> Result<LockGuard, Rejection> {
        match wait {
            Wait::Never => self.try_once(owner, &key).await,
            Wait::For(left) => {
                self.wait_for(owner, &key, self.lock.wait_timeout(left))
                    .await
            }
            Wait::Forever => self.wait_for(owner, &key, self.lock.wait_forever()).await,
        }
    }

    /// The cap that a gRPC request's `grpc-timeout` header puts on the wait (none in try mode,
    /// which never waits).
    pub(crate) fn grpc_cap(&self, grpc_timeout: Option<&[u8]>) -> Option<Duration> {
        match self.wait {
            Wait::Never => None,
            Wait::For(_) | Wait::Forever => grpc::grpc_timeout(grpc_timeout),
        }
    }

    async fn try_once(&self, owner: &LockOwner, key: &LockKey) -> Result<LockGuard, Rejection> {
        match owner.try_acquire(key.as_str(), &self.lock).await {
            Ok(Some(guard)) => Ok(guard),
            Ok(None) => Err(busy(key, RejectReason::Busy)),
            Err(err) => Err(Rejection::from_error(err)),
        }
    }

    async fn wait_for(
        &self,
        owner: &LockOwner,
        key: &LockKey,
        opts: LockOptions,
    ) -> Result<LockGuard, Rejection> {
        let Some((max, counts)) = &self.max_waiters else {
            return owner
                .acquire(key.as_str(), &opts)
                .await
                .map_err(Rejection::from_error);
        };
        // Only requests that actually wait count against the limit: take a free lock first.
        if let Some(guard) = owner
            .try_acquire(key.as_str(), &opts)
            .await
            .map_err(Rejection::from_error)?
        {
            return Ok(guard);
        }
        let _slot = counts
            .enter(key, *max)
            .ok_or_else(|| busy(key, RejectReason::TooManyWaiters))?;
        owner
            .acquire(key.as_str(), &opts)
            .await
            .map_err(Rejection::from_error)
    }
}

fn busy(key: &LockKey, reason: RejectReason) -> Rejection {
    Rejection::new(reason, Some(key.as_str().to_owned()), None)
}

/// The requests of this process that wait for each lock through one layer.
#[derive(Debug, Default)]
pub(crate) struct WaitCounts {
    counts: Mutex<HashMap<LockKey, usize>>,
}

impl WaitCounts {
    /// Count one more waiter for `key`, unless `max` already wait.
    fn enter(self: &Arc<Self>, key: &LockKey, max: usize) -> Option<WaitSlot> {
        let mut counts = self.counts.lock().unwrap_or_else(|p| p.into_inner());
        let count = counts.entry(key.clone()).or_insert(0);
        if *count >= max {
            if *count == 0 {
                counts.remove(key);
            }
            return None;
        }
        *count += 1;
        Some(WaitSlot {
            counts: self.clone(),
            key: key.clone(),
        })
    }
}

/// One waiter counted in [`WaitCounts`] until dropped.
struct WaitSlot {
    counts: Arc<WaitCounts>,
    key: LockKey,
}

impl Drop for WaitSlot {
    fn drop(&mut self) {
        let mut counts = self.counts.counts.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(count) = counts.get_mut(&self.key) {
            *count -= 1;
            if *count == 0 {
                counts.remove(&self.key);
            }
        }
    }
}
