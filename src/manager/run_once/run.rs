//! `JobRun`: what one run of a run-once job knows about its tick and its lock.

use std::time::SystemTime;

use crate::manager::LockInfo;

/// One run of a run-once job: the tick it runs for, the fencing token of its hold, and the signal
/// that the hold ended.
///
/// The job runs only while the lock is held, and the hold ends at the schedule's `at_most`
/// whatever the job does. A job that may run that long must watch [`lost`](Self::lost) and
/// stop: from then on, the next tick may run on another replica. The fencing token lets the
/// storage the job writes to refuse a run that went on regardless.
#[derive(Debug, Clone)]
pub struct JobRun {
    info: LockInfo,
    tick: SystemTime,
}

impl JobRun {
    pub(crate) fn new(info: LockInfo, tick: SystemTime) -> Self {
        JobRun { info, tick }
    }

    /// The tick this run is for, on this replica's wall clock.
    ///
    /// Replicas name a tick alike up to the skew of their clocks, so the tick (divided by the
    /// period) can key the run's output: a report for the night of this tick.
    pub fn tick(&self) -> SystemTime {
        self.tick
    }

    /// The job's lock name, as given.
    pub fn name(&self) -> &str {
        self.info.key()
    }

    /// The fencing token of this run's hold: strictly increasing over every run of the job, on
    /// every replica. Pass it to the storage the job writes to, so that a run that outlived its
    /// hold cannot overwrite a later run's work.
    pub fn fencing_token(&self) -> u64 {
        self.info.fencing_token()
    }

    /// True once the hold ended or may have ended: `at_most` passed, or the lock was lost (see
    /// [`LockInfo::is_lost`]). It never turns false again.
    pub fn is_lost(&self) -> bool {
        self.info.is_lost()
    }

    /// Resolves when the hold ended or may have ended (see [`is_lost`](Self::is_lost)): race it
    /// against the work with `tokio::select!`, and stop the work when it fires.
    pub async fn lost(&self) {
        self.info.lost().await
    }

    /// The run's lock, as a handler would see it.
    pub fn info(&self) -> LockInfo {
        self.info.clone()
    }
}
