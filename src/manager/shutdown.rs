//! `LockManager::shutdown`: leave cleanly, so that what this process held is free at once for the
//! other replicas instead of after a lease.

use std::time::Duration;

use futures_util::future::join_all;

use super::guard::release;
use super::live::Hold;
use super::Shared;
use crate::error::LockError;

/// How long the shutdown waits for a step (running acquisitions to end, background work to
/// finish) beyond the backend's own bound on one attempt.
const STEP_MARGIN: Duration = Duration::from_secs(1);

impl Shared {
    /// Close the manager, release every hold still alive, and stop its tasks once their work is
    /// done. The first failure to release is returned (that lock frees itself when its lease ends).
    pub(crate) async fn shutdown(&self) -> Result<(), LockError> {
        if !self.closing.close() {
            return Ok(());
        }
        // Waiting requests check again, find the manager closed and leave their queues.
        self.waiters.wake_all();
        self.cohorts.close();
        self.read_groups.close();
        let limit =
            (self.backend.attempt_timeout().unwrap_or_default()).saturating_add(STEP_MARGIN);
        if tokio::time::timeout(limit, self.closing.ended())
            .await
            .is_err()
        {
            tracing::warn!("shutdown: acquisitions still running after {limit:?}; going on");
        }
        let released = self.release_all().await;
        self.watchdog.stop(limit).await;
        // The inboxes end when their stop is dropped.
        drop(self.lock_inbox_stop().take());
        tracing::debug!(manager = %self.id, "lock manager shut down");
        released
    }

    /// Release every hold of a live guard; each guard finds its hold gone and is lost.
    async fn release_all(&self) -> Result<(), LockError> {
        let holds = self.live.take_all();
        let outcomes = join_all(holds.iter().map(|hold| self.release_at_shutdown(hold))).await;
        outcomes.into_iter().collect()
    }

    async fn release_at_shutdown(&self, hold: &Hold) -> Result<(), LockError> {
        self.stop_renewing(hold);
        // a cohort's hold may have been handed on: its whole block of tokens counts as used
        let outcome = release(&self.backend, hold, None).await;
        hold.lost.fire();
        outcome
            .map(drop)
            .map_err(|err| LockError::unavailable(&hold.key, err))
    }
}
