//! What every max_hold test checks: when a guard's `lost()` fires, against when its
//! acquisition began and returned, and that another manager then takes the lock.

use std::time::{Duration, Instant};

use tower_lock::{LockGuard, LockManager, LockOptions};

use crate::support::GENEROUS;

/// Timer slack allowed past the ceiling: the signal fires at its deadline, and the runtime wakes
/// the test a little later on a loaded machine.
pub const SLACK: Duration = Duration::from_millis(150);

/// A short watchdog lease: renewed every 200 ms, so a ceiling of a second or so meets several
/// renewals, which it cuts.
pub const SHORT_LEASE: Duration = Duration::from_millis(600);

/// A guard taken between `before` and `after`, with a ceiling of `max_hold`.
pub struct Timed {
    pub guard: LockGuard,
    pub before: Instant,
    pub after: Instant,
}

/// Acquire `key` with `opts` on `m`, noting when the acquisition began and returned.
pub async fn timed(m: &LockManager, key: &str, opts: &LockOptions) -> Timed {
    let before = Instant::now();
    let guard = m.acquire(key, opts).await.expect("acquire");
    Timed {
        guard,
        before,
        after: Instant::now(),
    }
}

/// `held`'s `lost()` fires at its ceiling `max_hold`: not before `max_hold` after its
/// acquisition began (it is counted from the start of the call that took the lock), and not later
/// than `max_hold` after it returned (plus timer slack). Returns when it fired.
pub async fn lost_at_ceiling(held: &Timed, max_hold: Duration) -> Instant {
    assert!(!held.guard.is_lost(), "held at first");
    tokio::time::timeout(max_hold + GENEROUS, held.guard.lost())
        .await
        .expect("lost() fires at the ceiling");
    let fired = Instant::now();
    assert!(held.guard.is_lost());
    assert!(
        fired >= held.before + max_hold,
        "lost {:?} after the acquisition began, before the ceiling of {max_hold:?}",
        fired - held.before
    );
    assert!(
        fired <= held.after + max_hold + SLACK,
        "lost {:?} after the acquisition returned, past the ceiling of {max_hold:?}",
        fired - held.after
    );
    fired
}

/// Another manager's acquisition of `key` with `opts` succeeds while `held` is still alive
/// (never released): the server ended the hold. Exclusion held: it came after the old guard
/// knew it was lost, and its token is above the old one.
pub async fn taken_over(other: &LockManager, key: &str, opts: &LockOptions, held: &Timed) {
    let opts = opts.wait_timeout(GENEROUS);
    let guard = other
        .acquire(key, &opts)
        .await
        .expect("taken after the ceiling");
    assert!(
        held.guard.is_lost(),
        "another holder only after lost() fired"
    );
    assert!(guard.fencing_token() > held.guard.fencing_token());
    guard.release().await.expect("release");
}
