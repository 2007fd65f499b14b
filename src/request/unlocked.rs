//! Requests that pass a lock layer or middleware without taking any lock: logged at DEBUG with
//! their path, and counted in `tower_lock_unlocked_total` (feature `metrics`), so that a pattern
//! that silently stopped matching shows up in the logs and on a dashboard.

#[cfg(feature = "metrics")]
const UNLOCKED_TOTAL: &str = "tower_lock_unlocked_total";

/// Record that the request for `path` passes without a lock (its extractor named none).
pub(crate) fn passed(method: &str, path: &str) {
    tracing::debug!(method, path, "request passes the lock layer without a lock");
    #[cfg(feature = "metrics")]
    {
        static DESCRIBED: std::sync::Once = std::sync::Once::new();
        DESCRIBED.call_once(|| {
            metrics::describe_counter!(
                UNLOCKED_TOTAL,
                metrics::Unit::Count,
                "Requests that passed a lock layer without taking any lock (the key extractor \
                 named none)"
            );
        });
        metrics::counter!(UNLOCKED_TOTAL).increment(1);
    }
}
