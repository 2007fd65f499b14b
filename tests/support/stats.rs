//! Summaries of latency samples for the benches and examples.

use std::time::Duration;

fn sorted(samples: &[Duration]) -> Vec<Duration> {
    let mut v = samples.to_vec();
    v.sort();
    v
}

/// The median of `samples` (not empty).
pub fn median(samples: &[Duration]) -> Duration {
    sorted(samples)[samples.len() / 2]
}

/// The 99th percentile of `samples` (not empty).
pub fn p99(samples: &[Duration]) -> Duration {
    let v = sorted(samples);
    v[(v.len() * 99 / 100).min(v.len() - 1)]
}

/// `a / b`, e.g. a latency as a multiple of the PING round trip.
pub fn ratio(a: Duration, b: Duration) -> f64 {
    a.as_secs_f64() / b.as_secs_f64()
}
