//! Time arithmetic on durations a user chose: a wait timeout, a lease. Any `Duration` is a valid
//! option, but `Instant + Duration` panics when the sum is past what the clock can represent
//! (`Duration::MAX`, or about 292 years on Linux). Here the sum saturates instead, so no option a
//! user can pass panics; the options themselves are bounded where they are set
//! ([`crate::LockOptions::MAX_LEASE`]). It imports nothing of the crate.

use std::time::{Duration, Instant};

/// How far ahead [`later`] reaches when the sum it was asked for is past the clock's end: beyond
/// any lease or wait that can still end, and within every clock's range.
const FAR: Duration = Duration::from_secs(100 * 365 * 24 * 60 * 60);

/// The deadline of a wait of `timeout` begun at `from`; `None` (no deadline: the wait ends only
/// with the lock) when the clock cannot represent it, as a wait that long never ends anyway.
pub(crate) fn deadline(from: Instant, timeout: Duration) -> Option<Instant> {
    from.checked_add(timeout)
}

/// `from + after`, or an instant at least a century away when the clock ends before that.
pub(crate) fn later(from: Instant, after: Duration) -> Instant {
    if let Some(at) = from.checked_add(after) {
        return at;
    }
    let mut step = FAR;
    while !step.is_zero() {
        if let Some(at) = from.checked_add(step) {
            return at;
        }
        step /= 2;
    }
    from
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_past_the_clock_saturate() {
        let now = Instant::now();
        assert_eq!(deadline(now, Duration::MAX), None);
        assert_eq!(deadline(now, Duration::ZERO), Some(now));
        assert!(later(now, Duration::MAX) >= now + FAR);
        assert_eq!(
            later(now, Duration::from_secs(5)),
            now + Duration::from_secs(5)
        );
    }
}
