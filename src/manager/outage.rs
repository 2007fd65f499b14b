//! Whether the backend is known unreachable: the first failure of an outage is logged at WARN, the
//! rest at DEBUG until the backend answers again (one line per outage, not one per request).

use std::sync::atomic::{AtomicBool, Ordering};

use crate::error::LockError;

/// The backend's reachability as the manager's attempts last found it.
#[derive(Debug, Default)]
pub(crate) struct Outage {
    down: AtomicBool,
}

impl Outage {
    /// An attempt on `key` could not reach the backend (`err` says why).
    pub(crate) fn failed(&self, err: &LockError) {
        if self.down.swap(true, Ordering::Relaxed) {
            tracing::debug!(error = %err, "lock backend still unreachable");
        } else {
            tracing::warn!(
                error = %err,
                "lock backend unreachable; further failures are logged at DEBUG until it answers"
            );
        }
    }

    /// Whether the last attempt found the backend unreachable.
    pub(crate) fn is_down(&self) -> bool {
        self.down.load(Ordering::Relaxed)
    }

    /// An attempt was answered.
    pub(crate) fn answered(&self) {
        // a load first: the usual case (no outage) writes nothing shared
        if self.down.load(Ordering::Relaxed) && self.down.swap(false, Ordering::Relaxed) {
            tracing::info!("lock backend answers again");
        }
    }
}
