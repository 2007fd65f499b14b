//! Requests that pass a lock layer or middleware without (some of) their locks.
//!
//! An extractor that named no lock on purpose (a `from_fn` returning `None`, a method left out by
//! `skip_methods`) is logged at DEBUG and counted in `tower_lock_unlocked_total` (feature
//! `metrics`). An optional extractor that did not match the request is what a mistaken extractor
//! looks like, so it is counted where the user can read it ([`UnlockedCounter`]), in
//! `tower_lock_unmatched_total`, and logged at WARN once a minute per extractor and route.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::key::Keys;

#[cfg(feature = "metrics")]
const UNLOCKED_TOTAL: &str = "tower_lock_unlocked_total";
#[cfg(feature = "metrics")]
const UNMATCHED_TOTAL: &str = "tower_lock_unmatched_total";

/// How often one route's warning may be logged.
const WARN_EVERY: Duration = Duration::from_secs(60);
/// How many routes one layer remembers warnings for; beyond that, routes share one warning per
/// extractor, so that requests for ever new paths cannot flood the log or memory.
const MAX_ROUTES: usize = 64;

/// The number of requests that a layer or middleware let through without their locks because an
/// optional extractor did not match them. Read it for a health check or a test.
///
/// Every clone of the layer (or middleware) and every service it made count into the same one.
#[derive(Debug, Clone, Default)]
pub struct UnlockedCounter(Arc<AtomicU64>);

impl UnlockedCounter {
    /// How many requests were let through so far.
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// When the warning for one route was last logged, and how many requests came since.
#[derive(Debug)]
struct Warned {
    at: Instant,
    since: u64,
}

/// The unlocked requests of one layer or middleware: their counter and their warnings.
#[derive(Debug, Clone, Default)]
pub(crate) struct UnlockedLog {
    counter: UnlockedCounter,
    warned: Arc<Mutex<HashMap<String, Warned>>>,
}

impl UnlockedLog {
    /// The counter users read.
    pub(crate) fn counter(&self) -> UnlockedCounter {
        self.counter.clone()
    }

    /// Record how the request `method` `path` passes with `keys`: counted and warned about when
    /// an optional extractor did not match it, logged at DEBUG when it takes no lock at all.
    pub(crate) fn note(&self, keys: &Keys, method: &str, path: &str) {
        if let Some(what) = keys.unmatched_by() {
            self.unmatched(what, method, path, keys.is_empty());
        }
        if keys.is_empty() {
            passed(method, path);
        }
    }

    fn unmatched(&self, what: &str, method: &str, path: &str, unlocked: bool) {
        self.counter.0.fetch_add(1, Ordering::Relaxed);
        #[cfg(feature = "metrics")]
        {
            static DESCRIBED: std::sync::Once = std::sync::Once::new();
            DESCRIBED.call_once(|| {
                metrics::describe_counter!(
                    UNMATCHED_TOTAL,
                    metrics::Unit::Count,
                    "Requests let through without (some of) their locks because an optional key \
                     extractor did not match them"
                );
            });
            metrics::counter!(UNMATCHED_TOTAL).increment(1);
        }
        let Some(since) = self.due(what, method, path) else {
            return;
        };
        let locks = if unlocked { "no lock" } else { "some locks" };
        tracing::warn!(
            extractor = what,
            method,
            path,
            since_last_warning = since,
            "an optional lock extractor did not match: the request runs without {locks} \
             (counted; this warning repeats at most once a minute per route)"
        );
    }

    /// Whether the warning for this route is due; if so, how many requests came since the last.
    fn due(&self, what: &str, method: &str, path: &str) -> Option<u64> {
        let now = Instant::now();
        let mut warned = self.warned.lock().unwrap_or_else(|p| p.into_inner());
        let mut route = format!("{what} | {method} {path}");
        if !warned.contains_key(&route) && warned.len() >= MAX_ROUTES {
            warned.retain(|_, w| now.duration_since(w.at) < WARN_EVERY);
            if warned.len() >= MAX_ROUTES {
                route = format!("{what} | other routes");
            }
        }
        match warned.get_mut(&route) {
            Some(w) if now.duration_since(w.at) < WARN_EVERY => {
                w.since += 1;
                None
            }
            Some(w) => {
                let since = std::mem::take(&mut w.since) + 1;
                w.at = now;
                Some(since)
            }
            None => {
                warned.insert(route, Warned { at: now, since: 0 });
                Some(1)
            }
        }
    }
}

/// Record that the request for `path` passes without a lock (its extractor named none).
fn passed(method: &str, path: &str) {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_warning_per_route_and_minute_and_a_bounded_table() {
        let log = UnlockedLog::default();
        assert_eq!(log.due("pattern /a/{id}", "GET", "/health"), Some(1));
        assert_eq!(log.due("pattern /a/{id}", "GET", "/health"), None);
        assert_eq!(log.due("pattern /a/{id}", "GET", "/metrics"), Some(1));
        for i in 0..1000 {
            log.due("pattern /a/{id}", "GET", &format!("/x/{i}"));
        }
        let warned = log.warned.lock().expect("lock");
        assert!(warned.len() <= MAX_ROUTES + 1, "{}", warned.len());
        assert_eq!(
            warned["pattern /a/{id} | other routes"].since,
            1000 - 62 - 1
        );
    }

    #[test]
    fn only_unmatched_extractors_are_counted() {
        let log = UnlockedLog::default();
        let counter = log.clone().counter();
        log.note(&Keys::none(), "GET", "/");
        assert_eq!(counter.get(), 0, "no lock on purpose is not counted");
        log.note(&Keys::unmatched("header x-a"), "GET", "/");
        log.note(&Keys::unmatched("header x-a"), "GET", "/");
        assert_eq!(counter.get(), 2);
    }
}
