//! The layer's metrics, per request, through the `metrics` facade (feature `metrics`; without it
//! every call here compiles to nothing). The manager's (per acquisition, lease and Redis call) are
//! in `crate::telemetry`.
//!
//! - `tower_lock_hold_seconds` (histogram): time the locks of a request were held;
//! - `tower_lock_rejections_total` (counter, label `reason`: `timeout`, `busy`, ...): requests the
//!   layer answered itself;
//! - `tower_lock_request_leases_lost_total` (counter): requests whose lease was lost while they
//!   held it;
//! - `tower_lock_waiters` (gauge): requests of this process acquiring a lock right now;
//! - `tower_lock_unlocked_total` (counter, in `unlocked.rs`): requests that passed without a lock.

use std::time::Duration;

use super::reject::RejectReason;

/// Counts one request in `tower_lock_waiters` for as long as it lives.
pub(crate) struct WaiterGauge(());

/// Describe the layer's metrics to the installed recorder.
pub(crate) fn describe() {
    #[cfg(feature = "metrics")]
    {
        use metrics::{describe_counter, describe_gauge, describe_histogram, Unit};
        describe_histogram!(
            "tower_lock_hold_seconds",
            Unit::Seconds,
            "Time the locks of one request were held."
        );
        describe_counter!(
            "tower_lock_rejections_total",
            Unit::Count,
            "Requests the lock layer answered itself (label reason: invalid_key, timeout, busy, too_many_waiters, unavailable, lease_lost, failed)."
        );
        describe_counter!(
            "tower_lock_request_leases_lost_total",
            Unit::Count,
            "Requests whose lease was lost while they held it."
        );
        describe_gauge!(
            "tower_lock_waiters",
            Unit::Count,
            "Requests of this process acquiring their locks right now."
        );
    }
}

impl WaiterGauge {
    pub(crate) fn start() -> Self {
        #[cfg(feature = "metrics")]
        metrics::gauge!("tower_lock_waiters").increment(1.0);
        WaiterGauge(())
    }
}

impl Drop for WaiterGauge {
    fn drop(&mut self) {
        #[cfg(feature = "metrics")]
        metrics::gauge!("tower_lock_waiters").decrement(1.0);
    }
}

pub(crate) fn held(_elapsed: Duration, _lost: bool) {
    #[cfg(feature = "metrics")]
    {
        metrics::histogram!("tower_lock_hold_seconds").record(_elapsed.as_secs_f64());
        if _lost {
            metrics::counter!("tower_lock_request_leases_lost_total").increment(1);
        }
    }
}

pub(crate) fn rejected(_reason: RejectReason) {
    #[cfg(feature = "metrics")]
    metrics::counter!("tower_lock_rejections_total", "reason" => _reason.as_str()).increment(1);
}
