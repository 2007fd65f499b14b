//! One replica's schedule of a run-once job: wait for each tick, try the lock once, run the job
//! on its own task while the lock is held, keep the lock until `at_least`, release it.
//!
//! The job runs on a task of its own so that a panic ends that task only: the schedule sees it as
//! the job's end, logs it, releases the lock and goes on.

use std::future::Future;
use std::time::{Instant, SystemTime};

use tokio::sync::watch;
use tokio::task::{JoinError, JoinHandle};

use super::{JobRun, JobSchedule};
use crate::error::LockError;
use crate::manager::{LockGuard, LockManager};
use crate::saturating::later;

/// What one replica runs for one job.
pub(super) struct Schedule<F> {
    pub(super) manager: LockManager,
    pub(super) name: String,
    pub(super) schedule: JobSchedule,
    pub(super) job: F,
    /// True once the schedule's handle asked it to stop.
    pub(super) stop: watch::Receiver<bool>,
}

impl<F, Fut> Schedule<F>
where
    F: FnMut(JobRun) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    /// Run the ticks until the handle stops the schedule or the manager shuts down (which
    /// cancels a run in progress: the shutdown released its lock already).
    pub(super) async fn run(mut self) {
        let shared = self.manager.shared.clone();
        let mut last = None;
        loop {
            let tick = self.schedule.next_tick(SystemTime::now(), last);
            last = Some(tick);
            let mut stop = self.stop.clone();
            // biased: a stop asked during a run ends the schedule even if the next tick is due
            tokio::select! {
                biased;
                _ = stop.wait_for(|stopped| *stopped) => return,
                () = shared.closing.closed() => return,
                () = wait_for(tick) => {}
            }
            tokio::select! {
                () = self.run_tick(tick) => {}
                () = shared.closing.closed() => return,
            }
        }
    }

    /// Run the job for `tick` if this replica gets the lock; every failure is logged and leaves
    /// the next tick to try again.
    async fn run_tick(&mut self, tick: SystemTime) {
        let name = self.name.as_str();
        let now = SystemTime::now();
        if self.schedule.is_missed(tick, now) {
            let late = now.duration_since(tick).unwrap_or_default();
            tracing::warn!(
                job = name,
                ?tick,
                ?late,
                "tick reached at_least late or later; skipped"
            );
            return;
        }
        let guard = match self
            .manager
            .try_acquire(name, &self.schedule.lock_options())
            .await
        {
            Ok(Some(guard)) => guard,
            Ok(None) => return tracing::debug!(job = name, ?tick, "lock busy; tick skipped"),
            Err(LockError::Closed) => return,
            Err(err) => {
                return tracing::warn!(job = name, ?tick, error = %err, "tick not run; the next tick tries again");
            }
        };
        let started = Instant::now();
        let run = JobRun::new(guard.info(), tick);
        let outcome = JobTask(tokio::spawn((self.job)(run))).finish().await;
        if let Err(err) = outcome {
            log_failed_run(name, tick, err);
        }
        keep_until_at_least(guard, started, &self.schedule).await;
    }
}

/// A job's task, aborted when dropped: a schedule that ends (its handle dropped, its manager shut
/// down) leaves no run behind.
struct JobTask(JoinHandle<()>);

impl JobTask {
    async fn finish(mut self) -> Result<(), JoinError> {
        (&mut self.0).await
    }
}

impl Drop for JobTask {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Log a run that panicked (or was cancelled by the runtime's shutdown).
fn log_failed_run(name: &str, tick: SystemTime, err: JoinError) {
    if !err.is_panic() {
        return tracing::warn!(job = name, ?tick, "job cancelled");
    }
    let panic = err.into_panic();
    let message = (panic.downcast_ref::<&str>().copied())
        .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("a panic without a message");
    tracing::error!(
        job = name,
        ?tick,
        panic = message,
        "job panicked; the schedule goes on"
    );
}

/// Hold `guard` until `at_least` after the run `started` (or until it is lost), then release it.
/// Nothing is sent meanwhile: the fixed lease needs no renewal.
async fn keep_until_at_least(guard: LockGuard, started: Instant, schedule: &JobSchedule) {
    let until = later(started, schedule.at_least_value());
    tokio::select! {
        () = tokio::time::sleep_until(until.into()) => {}
        () = guard.lost() => {}
    }
    let name = guard.key().to_owned();
    let lost = guard.is_lost();
    match guard.release().await {
        Ok(()) => {}
        Err(LockError::NotHeld { .. }) if lost => {
            tracing::debug!(job = name, "lock ended at at_most before its release");
        }
        Err(err) => {
            tracing::warn!(job = name, error = %err, "job lock not released; it frees itself at at_most")
        }
    }
}

/// Sleep until the wall clock reaches `tick`. The sleep runs on the monotonic clock, so the wall
/// clock is read again on waking: a clock stepped back is waited for again.
async fn wait_for(tick: SystemTime) {
    while let Ok(left) = tick.duration_since(SystemTime::now()) {
        if left.is_zero() {
            return;
        }
        tokio::time::sleep(left).await;
    }
}
