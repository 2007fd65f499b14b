//! `JobSchedule`: when a run-once job runs and how long its lock is kept.
//!
//! Ticks are counted on the wall clock from the UNIX epoch, not from the start of each process:
//! that is how replicas started at different moments agree on which tick is which, up to the skew
//! of their clocks.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::options::LockOptions;

/// The longest period a schedule takes (100 years): a longer one is lowered to it, a job that in
/// practice never runs twice. Every tick it yields stays within the range of `SystemTime`.
const MAX_PERIOD: Duration = Duration::from_secs(100 * 365 * 24 * 60 * 60);

const NANOS_PER_SEC: u128 = 1_000_000_000;

/// When a run-once job runs: every `period`, on ticks that all replicas agree on, with ShedLock's
/// two bounds on how long its lock is held.
///
/// Ticks fall on the multiples of `period` since the UNIX epoch, plus the `offset`, on each
/// replica's wall clock. `at_most` (ShedLock's `lockAtMostFor`) bounds the hold: the lock frees
/// itself then, whatever the job does, and the job's `lost()` fires. `at_least` (ShedLock's
/// `lockAtLeastFor`) keeps the lock after a job that ended early, so that a replica whose clock
/// is behind by less than that finds the tick taken.
///
/// ```
/// use std::time::Duration;
/// use tower_lock::JobSchedule;
///
/// // every day at 02:00 UTC; the lock is held 10 minutes at least, 1 hour at most
/// let nightly = JobSchedule::every(Duration::from_secs(24 * 60 * 60))
///     .offset(Duration::from_secs(2 * 60 * 60))
///     .at_least(Duration::from_secs(10 * 60))
///     .at_most(Duration::from_secs(60 * 60));
/// assert_eq!(nightly.at_most_value(), Duration::from_secs(60 * 60));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JobSchedule {
    period: Duration,
    offset: Duration,
    at_most: Duration,
    at_least: Duration,
}

impl JobSchedule {
    /// A tick every `period`, with the lock held at most one period and at least not at all.
    ///
    /// A period over 100 years (`Duration::MAX` included) is lowered to it. Zero is refused when
    /// the job is scheduled: it would run without pause.
    pub fn every(period: Duration) -> Self {
        let period = period.min(MAX_PERIOD);
        JobSchedule {
            period,
            offset: Duration::ZERO,
            at_most: period.min(LockOptions::MAX_LEASE),
            at_least: Duration::ZERO,
        }
    }

    /// Move every tick `offset` past the multiple of the period (02:00 for a daily job).
    ///
    /// An offset not shorter than the period is refused when the job is scheduled: it would name
    /// the same ticks as a shorter one, and is likely a mistake.
    pub fn offset(mut self, offset: Duration) -> Self {
        self.offset = offset;
        self
    }

    /// Hold the lock at most this long (ShedLock's `lockAtMostFor`): a bound for a job that hangs
    /// or whose process dies. Default: one period.
    ///
    /// The hold is a fixed lease with this ceiling, so no renewal can stretch it: the job's
    /// `lost()` fires then and the job must stop, as the next tick may run elsewhere. Longer than
    /// the period is allowed: the ticks that fall while the job runs find the lock busy and are
    /// skipped everywhere, until the job ends or `at_most` passes. Zero is refused when the job
    /// is scheduled; over [`LockOptions::MAX_LEASE`] it is lowered to it.
    pub fn at_most(mut self, at_most: Duration) -> Self {
        self.at_most = at_most.min(LockOptions::MAX_LEASE);
        self
    }

    /// Keep the lock at least this long after the job starts (ShedLock's `lockAtLeastFor`), even
    /// when the job ends sooner. Default: zero.
    ///
    /// Replicas' clocks are never quite in step: a replica whose clock is behind reaches the tick
    /// later, and would run it again if the lock were already free. Choose it above the clock
    /// skew between replicas. Nothing is sent to the server meanwhile: the fixed lease needs no
    /// renewal. Longer than `at_most`, or not shorter than the period (the next tick would find
    /// the lock kept), is refused when the job is scheduled; over [`LockOptions::MAX_LEASE`] it
    /// is lowered to it.
    pub fn at_least(mut self, at_least: Duration) -> Self {
        self.at_least = at_least.min(LockOptions::MAX_LEASE);
        self
    }

    /// The time between two ticks.
    pub fn period_value(&self) -> Duration {
        self.period
    }

    /// How far past each multiple of the period the ticks fall.
    pub fn offset_value(&self) -> Duration {
        self.offset
    }

    /// The longest hold of the lock (see [`at_most`](Self::at_most)).
    pub fn at_most_value(&self) -> Duration {
        self.at_most
    }

    /// The shortest hold of the lock (see [`at_least`](Self::at_least)).
    pub fn at_least_value(&self) -> Duration {
        self.at_least
    }

    /// Why this schedule cannot be meant, if it cannot.
    pub(crate) fn refusal(&self) -> Option<String> {
        let (period, at_most, at_least) = (self.period, self.at_most, self.at_least);
        if period.is_zero() {
            return Some("the period is zero: the job would run without pause".to_owned());
        }
        if self.offset >= period {
            return Some(format!(
                "the offset ({:?}) is not shorter than the period ({period:?})",
                self.offset
            ));
        }
        if at_most.is_zero() {
            return Some("at_most is zero: a hold that ends as it begins excludes nothing".into());
        }
        if at_least > at_most {
            return Some(format!(
                "at_least ({at_least:?}) is longer than at_most ({at_most:?}): the lock cannot \
                 be kept past at_most"
            ));
        }
        if at_least >= period {
            return Some(format!(
                "at_least ({at_least:?}) is not shorter than the period ({period:?}): every \
                 next tick would find the lock still kept, and be skipped"
            ));
        }
        None
    }

    /// The options of each tick's attempt (made without waiting): a fixed lease of `at_most` and
    /// the same ceiling, so that the hold ends at `at_most` whatever renews it.
    pub(crate) fn lock_options(&self) -> LockOptions {
        (LockOptions::exclusive())
            .lease(self.at_most)
            .max_hold(self.at_most)
    }

    /// The first tick strictly after `now` and after `last` (the last tick this replica reached).
    pub(crate) fn next_tick(&self, now: SystemTime, last: Option<SystemTime>) -> SystemTime {
        let after = last.map_or(now, |last| now.max(last));
        let since = nanos_since_epoch(after);
        let (period, offset) = (self.period.as_nanos(), self.offset.as_nanos());
        let next = match since.checked_sub(offset) {
            Some(past) => (past / period + 1) * period + offset,
            None => offset,
        };
        let secs = u64::try_from(next / NANOS_PER_SEC).unwrap_or(u64::MAX);
        let nanos = (next % NANOS_PER_SEC) as u32;
        let tick = Duration::new(secs, nanos);
        UNIX_EPOCH.checked_add(tick).unwrap_or(after)
    }

    /// Whether `tick`, reached at `now`, is too late to run: `at_least` or more behind it, another
    /// replica may have run it and freed the lock already. With no `at_least`, no tick is.
    pub(crate) fn is_missed(&self, tick: SystemTime, now: SystemTime) -> bool {
        let late = now.duration_since(tick).unwrap_or_default();
        !self.at_least.is_zero() && late >= self.at_least
    }
}

/// Nanoseconds from the UNIX epoch to `at` (zero for a clock set before the epoch).
fn nanos_since_epoch(at: SystemTime) -> u128 {
    at.duration_since(UNIX_EPOCH).unwrap_or_default().as_nanos()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(ms: u64) -> Duration {
        Duration::from_millis(ms)
    }

    fn at(ms_since_epoch: u64) -> SystemTime {
        UNIX_EPOCH + ms(ms_since_epoch)
    }

    #[test]
    fn ticks_fall_on_multiples_of_the_period_plus_the_offset() {
        let schedule = JobSchedule::every(ms(200)).offset(ms(40));
        assert_eq!(schedule.next_tick(at(1_000), None), at(1_040));
        assert_eq!(schedule.next_tick(at(1_040), None), at(1_240));
        assert_eq!(schedule.next_tick(at(10), None), at(40));
        // a clock that stepped back never yields the last tick again
        assert_eq!(schedule.next_tick(at(900), Some(at(1_040))), at(1_240));
    }

    #[test]
    fn extreme_durations_saturate() {
        let schedule = JobSchedule::every(Duration::MAX)
            .at_most(Duration::MAX)
            .at_least(Duration::MAX);
        assert_eq!(schedule.period_value(), MAX_PERIOD);
        assert_eq!(schedule.at_most_value(), LockOptions::MAX_LEASE);
        assert_eq!(schedule.refusal(), None);
        let now = SystemTime::now();
        assert!(schedule.next_tick(now, None) > now);
    }

    #[test]
    fn nonsense_is_refused() {
        let every = JobSchedule::every(ms(200));
        assert!(JobSchedule::every(Duration::ZERO).refusal().is_some());
        assert!(every.at_most(Duration::ZERO).refusal().is_some());
        assert!(every.at_most(ms(100)).at_least(ms(150)).refusal().is_some());
        assert!(every.offset(ms(200)).refusal().is_some());
        assert!(every
            .at_most(ms(1_000))
            .at_least(ms(200))
            .refusal()
            .is_some());
        assert_eq!(every.at_most(ms(1_000)).at_least(ms(150)).refusal(), None);
    }

    #[test]
    fn a_tick_reached_at_least_late_is_missed() {
        let schedule = JobSchedule::every(ms(200)).at_least(ms(150));
        assert!(!schedule.is_missed(at(1_000), at(1_149)));
        assert!(schedule.is_missed(at(1_000), at(1_150)));
        assert!(!JobSchedule::every(ms(200)).is_missed(at(1_000), at(1_900)));
    }
}
