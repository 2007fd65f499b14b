//! Run-once jobs: a job that every replica schedules, and that runs on one replica per tick.
//!
//! Services run background work on every replica (a nightly report, a clean-up), and each run
//! must happen once, not once per replica. ShedLock's recipe does it with a lock per job, held
//! between `lockAtLeastFor` and `lockAtMostFor`; here the same recipe keeps the crate's safety
//! contract: the hold is a fixed lease the job cannot outlive unnoticed, its fencing token goes
//! to the job, and a panic, an outage or a dead replica never stops the schedule.
//!
//! # Implementation notes
//!
//! Each schedule is one task: it sleeps until the tick, tries the lock once, spawns the job on a
//! task of its own while the lock is held, and keeps the guard until `at_least` after the job's
//! start. Nothing is renewed meanwhile.

mod run;
mod schedule;
mod tick;

use std::future::Future;

use tokio::sync::watch;
use tokio::task::JoinHandle;

pub use run::JobRun;
pub use schedule::JobSchedule;

use super::LockManager;
use crate::error::LockError;
use crate::key::LockKey;

impl LockManager {
    /// Run `job` on every tick of `schedule`, on one replica per tick: the one that takes the lock
    /// `name` first. Call it on every replica, with the same name and schedule.
    ///
    /// At each tick, this replica tries the lock once, without waiting. A busy lock means another
    /// replica runs this tick: this one skips it. Otherwise the job runs with a [`JobRun`] (the
    /// tick, the fencing token, the lost signal), and the lock is kept until `at_least` after the
    /// job's start, then released. A tick whose attempt fails (Redis unreachable) is logged and
    /// skipped; a job that panics is logged and its lock released; neither stops the schedule.
    /// A tick this replica reaches `at_least` late or later (its process was paused) is skipped:
    /// another replica may have run it and freed the lock already.
    ///
    /// The job runs on a task of its own: call this inside a Tokio runtime. The schedule ends when
    /// its [`JobHandle`] is stopped or dropped, or when the manager shuts down.
    ///
    /// Refused with [`LockError::InvalidJob`]: a zero period, a zero `at_most`, an `at_least`
    /// longer than `at_most` or not shorter than the period, an offset not shorter than the
    /// period, no Tokio runtime. Refused with [`LockError::InvalidKey`] for a name no lock takes,
    /// and [`LockError::Closed`] once the manager is shut down.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), tower_lock::LockError> {
    /// use std::time::Duration;
    /// use tokio::sync::mpsc;
    /// use tower_lock::{JobRun, JobSchedule, LockManager};
    ///
    /// let manager = LockManager::memory();
    /// let (ran, mut runs) = mpsc::unbounded_channel();
    /// let schedule = JobSchedule::every(Duration::from_millis(20)).at_least(Duration::from_millis(5));
    /// let job = manager.run_once("clean-up", schedule, move |run: JobRun| {
    ///     let _ = ran.send(run.fencing_token());
    ///     async {}
    /// })?;
    /// let (first, second) = (runs.recv().await, runs.recv().await);
    /// assert!(second > first); // each run's token above the last
    /// job.stop().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn run_once<F, Fut>(
        &self,
        name: &str,
        schedule: JobSchedule,
        job: F,
    ) -> Result<JobHandle, LockError>
    where
        F: FnMut(JobRun) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        LockKey::new(name)?;
        let invalid = |reason: String| LockError::InvalidJob {
            key: name.to_owned(),
            reason,
        };
        if let Some(reason) = schedule.refusal() {
            return Err(invalid(reason));
        }
        let runtime = tokio::runtime::Handle::try_current()
            .map_err(|_| invalid("run_once needs a Tokio runtime to run the job on".into()))?;
        if self.shared.closing.is_closed() {
            return Err(LockError::Closed);
        }
        let (stop, stopped) = watch::channel(false);
        let schedule = tick::Schedule {
            manager: self.clone(),
            name: name.to_owned(),
            schedule,
            job,
            stop: stopped,
        };
        Ok(JobHandle {
            name: name.to_owned(),
            stop,
            task: Some(runtime.spawn(schedule.run())),
        })
    }
}

/// The schedule of a run-once job on this replica: stop it with [`stop`](Self::stop), or drop it.
///
/// Dropping it cancels a run in progress (the job's future is dropped at its next await) and
/// releases the lock without waiting: the `at_least` margin ends with it. `stop` lets the run
/// end first, as a deploy should.
#[derive(Debug)]
#[must_use = "the schedule ends as soon as its handle is dropped"]
pub struct JobHandle {
    name: String,
    stop: watch::Sender<bool>,
    task: Option<JoinHandle<()>>,
}

impl JobHandle {
    /// The job's lock name, as given.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// True once the schedule has ended: the manager was shut down.
    pub fn is_finished(&self) -> bool {
        self.task.as_ref().is_none_or(JoinHandle::is_finished)
    }

    /// End the schedule: no tick starts after this call. A run in progress is let finish, and
    /// its lock is kept until `at_least` after its start as always, so that a replica whose
    /// clock is behind does not run that tick again; then this returns.
    ///
    /// The wait is bounded by the job: a job that goes on after `at_most` (its `lost()` fired)
    /// is waited for. Drop the handle instead to cancel the run.
    pub async fn stop(mut self) {
        self.stop.send_replace(true);
        if let Some(task) = self.task.take() {
            if let Err(err) = task.await {
                tracing::warn!(job = self.name, error = %err, "job schedule ended abnormally");
            }
        }
    }
}

impl Drop for JobHandle {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}
