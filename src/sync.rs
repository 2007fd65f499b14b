//! The locks and atomics of the crate's in-process hand-offs: std's, or shuttle's when their
//! schedules are explored.
//!
//! The cohorts, the read groups and the wait registry share state between the tasks of one
//! process. Their schedule checks (`schedules`, built only by `scripts/schedules.sh` under
//! `--cfg tower_lock_shuttle`) run the same code with shuttle's `Mutex` and atomics, so that the
//! checker can switch tasks at every lock and every atomic access. Any other build uses std's,
//! as before: the same types, the same speed.
//!
//! [`seeded`] is how those checks plant a defect in the real code, to show that they find it: it
//! is `false` in every other build, a constant the compiler folds away.

#[cfg(not(all(test, tower_lock_shuttle)))]
pub(crate) use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize};
#[cfg(not(all(test, tower_lock_shuttle)))]
pub(crate) use std::sync::{Mutex, MutexGuard};

#[cfg(all(test, tower_lock_shuttle))]
pub(crate) use shuttle::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize};
#[cfg(all(test, tower_lock_shuttle))]
pub(crate) use shuttle::sync::{Mutex, MutexGuard};

#[cfg(all(test, tower_lock_shuttle))]
thread_local! {
    /// The defect planted in this thread's check: shuttle runs every task of a check on the
    /// test's own thread, and tests running side by side do not see each other's.
    static PLANTED: std::cell::Cell<Option<Defect>> = const { std::cell::Cell::new(None) };
}

/// Plant `defect` in this thread's checks (`None`: none).
#[cfg(all(test, tower_lock_shuttle))]
pub(crate) fn plant(defect: Option<Defect>) {
    PLANTED.set(defect);
}

/// Whether `defect` is planted in this thread's check.
#[cfg(all(test, tower_lock_shuttle))]
pub(crate) fn seeded(defect: Defect) -> bool {
    PLANTED.get() == Some(defect)
}

/// A defect the schedule checks plant in the code, one per invariant they assert.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(not(all(test, tower_lock_shuttle)), allow(dead_code))]
pub(crate) enum Defect {
    /// A cohort hands on a hold whose lease is lost.
    HandOffLost,
    /// A cohort's hand-off also gives the hold back to the server: two holders.
    HandOffAndRelease,
    /// A cohort hands its hold on after a connection dropped (the server may have restarted).
    DropIgnored,
    /// A read joins a group whose lease is lost.
    JoinLost,
    /// A waiter that leaves with an unused wake-up keeps it: the next waiter sleeps on.
    WakeKept,
    /// A link's reader gives an answer to the last caller waiting, not to the first.
    AnswerOutOfTurn,
}

/// Whether `defect` is planted: never, outside the schedule checks.
#[cfg(not(all(test, tower_lock_shuttle)))]
#[inline(always)]
pub(crate) const fn seeded(_: Defect) -> bool {
    false
}
