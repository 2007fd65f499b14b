//! Whether the manager's requests find the backend unreachable: reported to the manager's outage
//! log (one WARN line per outage, shared with the inboxes), and asked by a cohort's waiters.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::backend::OutageLog;
use crate::error::LockError;

/// The backend's reachability as the manager's attempts last found it.
#[derive(Debug)]
pub(crate) struct Outage {
    down: AtomicBool,
    log: Arc<OutageLog>,
}

/// The part of the manager that reports here, in the log.
const REQUESTS: &str = "requests";

impl Outage {
    pub(crate) fn new(log: Arc<OutageLog>) -> Self {
        Outage {
            down: AtomicBool::new(false),
            log,
        }
    }

    /// An attempt could not reach the backend (`err` says why).
    pub(crate) fn failed(&self, err: &LockError) {
        if self.down.swap(true, Ordering::Relaxed) {
            self.log.retry_failed(REQUESTS, err);
        } else {
            self.log.failed(REQUESTS, err);
        }
    }

    /// Whether the last attempt found the backend unreachable.
    pub(crate) fn is_down(&self) -> bool {
        self.down.load(Ordering::Relaxed)
    }

    /// An attempt was answered: the backend as a whole answers.
    pub(crate) fn answered(&self) {
        // a load first: the usual case (no outage) writes nothing shared
        if self.down.load(Ordering::Relaxed) && self.down.swap(false, Ordering::Relaxed) {
            self.log.answered(REQUESTS);
        }
    }
}
