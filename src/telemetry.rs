//! The engine's metrics, through the `metrics` facade (feature `metrics`; without it every call
//! here compiles to nothing). Each is described (unit and help) when a manager is built, so an
//! exporter installed before that shows its HELP text. The layer's own metrics (per request) are
//! in `request/metrics.rs`.
//!
//! | name | type | labels | what |
//! |---|---|---|---|
//! | `tower_lock_wait_seconds` | histogram | `outcome`, `mode` | one acquisition, from its start to its outcome |
//! | `tower_lock_holds` | gauge | | locks held by live guards of this process |
//! | `tower_lock_oldest_wait_seconds` | gauge | `mode` | age of the oldest request of this process waiting in that mode |
//! | `tower_lock_leases_lost_total` | counter | `cause` | leases the watchdog found lost |
//! | `tower_lock_renewals_total` | counter | `result` | lease renewals, one per lease per round |
//! | `tower_lock_inbox_reconnects_total` | counter | | pub/sub connections made again after a loss |
//! | `tower_lock_redis_call_seconds` | histogram | `result` | one Redis script call, connection included |

use std::time::Duration;

use crate::options::Mode;

mod oldest_wait;

pub(crate) use oldest_wait::{OldestWaitGauge, OldestWaits};

/// How an acquisition ended, as the `outcome` label says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    Acquired,
    /// `try_acquire` found the lock held.
    Busy,
    Timeout,
    /// The backend could not be reached, or the manager is shut down.
    Unavailable,
    /// The caller went away first.
    Cancelled,
    /// Refused: a bad key, or options the lock or the manager does not take.
    Refused,
}

impl Outcome {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Outcome::Acquired => "acquired",
            Outcome::Busy => "busy",
            Outcome::Timeout => "timeout",
            Outcome::Unavailable => "unavailable",
            Outcome::Cancelled => "cancelled",
            Outcome::Refused => "refused",
        }
    }
}

/// The `mode` label.
pub(crate) fn mode_label(mode: Mode) -> &'static str {
    mode.name()
}

/// Describe every metric to the installed recorder.
pub(crate) fn describe() {
    #[cfg(feature = "metrics")]
    {
        use metrics::{describe_counter, describe_gauge, describe_histogram, Unit};
        describe_histogram!(
            "tower_lock_wait_seconds",
            Unit::Seconds,
            "Time from the start of one acquisition to its outcome (label outcome: acquired, busy, timeout, unavailable, cancelled, refused)."
        );
        describe_gauge!(
            "tower_lock_holds",
            Unit::Count,
            "Locks held by live guards of this process (each re-entry counts)."
        );
        describe_gauge!(
            "tower_lock_oldest_wait_seconds",
            Unit::Seconds,
            "Age of the oldest request of this process waiting for a lock in that mode (label mode), updated every 500 ms; 0 when none waits."
        );
        describe_counter!(
            "tower_lock_leases_lost_total",
            Unit::Count,
            "Leases the watchdog found lost (label cause: gone, expired, late, claim, max_hold)."
        );
        describe_counter!(
            "tower_lock_renewals_total",
            Unit::Count,
            "Lease renewals, one per lease per round (label result: renewed, lost, failed)."
        );
        describe_counter!(
            "tower_lock_inbox_reconnects_total",
            Unit::Count,
            "Pub/sub (inbox) connections made again after one was lost."
        );
        describe_histogram!(
            "tower_lock_redis_call_seconds",
            Unit::Seconds,
            "One Redis script call, getting its connection included (label result: ok, error)."
        );
    }
}

pub(crate) fn waited(_outcome: Outcome, _mode: Mode, _elapsed: Duration) {
    #[cfg(feature = "metrics")]
    metrics::histogram!(
        "tower_lock_wait_seconds",
        "outcome" => _outcome.as_str(),
        "mode" => mode_label(_mode)
    )
    .record(_elapsed.as_secs_f64());
}

/// One more (or, with `false`, one fewer) hold of a live guard.
pub(crate) fn hold(_more: bool) {
    #[cfg(feature = "metrics")]
    {
        let gauge = metrics::gauge!("tower_lock_holds");
        match _more {
            true => gauge.increment(1.0),
            false => gauge.decrement(1.0),
        }
    }
}

pub(crate) fn lease_lost(_cause: &'static str) {
    #[cfg(feature = "metrics")]
    metrics::counter!("tower_lock_leases_lost_total", "cause" => _cause).increment(1);
}

pub(crate) fn renewed(_result: &'static str, _count: u64) {
    #[cfg(feature = "metrics")]
    metrics::counter!("tower_lock_renewals_total", "result" => _result).increment(_count);
}

pub(crate) fn inbox_reconnected() {
    #[cfg(feature = "metrics")]
    metrics::counter!("tower_lock_inbox_reconnects_total").increment(1);
}

pub(crate) fn redis_call(_ok: bool, _elapsed: Duration) {
    #[cfg(feature = "metrics")]
    {
        let result = if _ok { "ok" } else { "error" };
        metrics::histogram!("tower_lock_redis_call_seconds", "result" => result)
            .record(_elapsed.as_secs_f64());
    }
}
