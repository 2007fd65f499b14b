//! Re-entries and cohorts: a re-entry does not restart the ceiling (the owner's first hold
//! counts) and cannot lift it, only lower it; a re-entry into a hold a cohort shares counts its
//! own ceiling and loses only its guard; a request with a ceiling waits behind a cohort's hold
//! and then ends at its ceiling.

use std::time::{Duration, Instant};

use tower_lock::LockOptions;

use crate::ceiling::{lost_at_ceiling, taken_over, timed, Timed, SHORT_LEASE};
use crate::direct::managers;
use crate::support::fixture::Fixture;
use crate::support::GENEROUS;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reentry_keeps_the_first_holds_ceiling_memory() {
    a_reentry_keeps_the_first_holds_ceiling(Fixture::memory()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reentry_keeps_the_first_holds_ceiling_redis() {
    a_reentry_keeps_the_first_holds_ceiling(Fixture::redis()).await;
}

/// The first hold asks for 1.5 s; a re-entry with no ceiling leaves it; a re-entry 300 ms later
/// asking for 1 s lowers it to 1 s after the first hold began (not after the re-entry): every
/// guard of the owner is lost then, and another manager takes the lock.
async fn a_reentry_keeps_the_first_holds_ceiling(fx: Fixture) {
    let (m, other) = managers(&fx, SHORT_LEASE).await;
    let owner = m.owner();
    let before = Instant::now();
    let first = owner
        .acquire(
            "re",
            &LockOptions::exclusive().max_hold(Duration::from_millis(1500)),
        )
        .await
        .expect("first hold");
    let after = Instant::now();
    let unbounded = owner
        .acquire("re", &LockOptions::exclusive())
        .await
        .expect("re-entry");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let lower = LockOptions::exclusive().max_hold(Duration::from_millis(1000));
    let lowered = owner.acquire("re", &lower).await.expect("re-entry");
    assert_eq!(lowered.fencing_token(), first.fencing_token(), "one hold");
    let held = Timed {
        guard: first,
        before,
        after,
    };
    lost_at_ceiling(&held, Duration::from_millis(1000)).await;
    assert!(
        unbounded.is_lost() && lowered.is_lost(),
        "one lease, one ceiling"
    );
    taken_over(&other, "re", &LockOptions::exclusive(), &held).await;
}

/// On Redis, exclusive requests go through their process's cohort. A re-entry with a ceiling
/// into a hold the cohort shares counts its ceiling from the re-entry, and loses its own guard
/// only: the owner's first guard holds on, and the lock stays taken.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reentry_into_a_cohorts_hold_loses_only_its_guard() {
    let fx = Fixture::redis();
    let (m, other) = managers(&fx, SHORT_LEASE).await;
    let owner = m.owner();
    let first = owner
        .acquire("co", &LockOptions::exclusive())
        .await
        .expect("hold");
    let max_hold = Duration::from_millis(400);
    let reentry = timed_reentry(&owner, "co", max_hold).await;
    lost_at_ceiling(&reentry, max_hold).await;
    // a few renewals later the first guard still holds, and the lock is taken
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert!(
        !first.is_lost(),
        "the cohort's hold goes on for the other guard"
    );
    let busy = other.try_acquire("co", &LockOptions::exclusive()).await;
    assert!(busy.expect("try").is_none(), "still held");
    drop(reentry);
    first.release().await.expect("release");
    let free = LockOptions::exclusive().wait_timeout(GENEROUS);
    let next = other
        .acquire("co", &free)
        .await
        .expect("free once released");
    next.release().await.expect("release");
}

async fn timed_reentry(owner: &tower_lock::LockOwner, key: &str, max_hold: Duration) -> Timed {
    let before = Instant::now();
    let opts = LockOptions::exclusive().max_hold(max_hold);
    let guard = owner.acquire(key, &opts).await.expect("re-entry");
    Timed {
        guard,
        before,
        after: Instant::now(),
    }
}

/// A request with a ceiling waits behind a hold of its process's cohort (it takes the lock in
/// the backend itself, not by a hand-off in memory), gets it once that is released, and ends at
/// its ceiling, counted from its own hold.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_with_a_ceiling_waits_behind_a_cohort_then_ends() {
    let fx = Fixture::redis();
    let (m, other) = managers(&fx, SHORT_LEASE).await;
    let cohort = m
        .acquire("mix", &LockOptions::exclusive())
        .await
        .expect("hold");
    let max_hold = Duration::from_millis(800);
    let opts = LockOptions::exclusive().max_hold(max_hold);
    let waiting = {
        let m = m.clone();
        tokio::spawn(async move { timed(&m, "mix", &opts).await })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!waiting.is_finished(), "it waits for the cohort's hold");
    cohort.release().await.expect("release");
    let held = waiting.await.expect("task");
    lost_at_ceiling(&held, max_hold).await;
    taken_over(&other, "mix", &LockOptions::exclusive(), &held).await;
}
