//! The direct API, in every mode, on memory, a redis-server and (feature `cluster`) a Redis
//! Cluster: a hold with a ceiling ends there, however long the watchdog could keep it.

use std::time::Duration;

use tower_lock::{LockError, LockManager, LockOptions};

use crate::ceiling::{lost_at_ceiling, taken_over, timed, SHORT_LEASE};
use crate::support::fixture::Fixture;
use crate::support::GENEROUS;

crate::on_both_backends!(
    every_mode_ends_at_its_ceiling,
    a_ceiling_below_the_lease_cuts_the_lease,
    renewals_are_cut_to_the_ceiling,
    a_fixed_lease_is_cut_to_the_ceiling,
    zero_is_refused_and_duration_max_never_ends,
);

/// Two managers with `lease` (two processes; in memory, one manager is every process).
pub async fn managers(fx: &Fixture, lease: Duration) -> (LockManager, LockManager) {
    let builder = || LockManager::builder().lease(lease);
    match fx {
        Fixture::Memory(_) => {
            let m = builder().build().await.expect("memory manager");
            (m.clone(), m)
        }
        Fixture::Redis(server) => {
            let a = builder().redis(server.url()).build().await.expect("a");
            let b = builder().redis(server.url()).build().await.expect("b");
            (a, b)
        }
        #[cfg(feature = "cluster")]
        Fixture::Cluster(cluster) => {
            let a = builder().cluster(cluster.urls()).build().await.expect("a");
            let b = builder().cluster(cluster.urls()).build().await.expect("b");
            (a, b)
        }
    }
}

/// A hold the watchdog renews every 200 ms ends at its ceiling of 1.1 s, in each mode (a
/// semaphore of one permit, so that another permit waits), and another manager takes the lock.
async fn every_mode_ends_at_its_ceiling(fx: Fixture) {
    let (holder, other) = managers(&fx, SHORT_LEASE).await;
    let max_hold = Duration::from_millis(1100);
    let modes = [
        LockOptions::exclusive(),
        LockOptions::fair(),
        LockOptions::read(),
        LockOptions::write(),
        LockOptions::semaphore(1),
    ];
    for (i, opts) in modes.iter().enumerate() {
        let key = format!("ceiling:{i}");
        let held = timed(&holder, &key, &opts.max_hold(max_hold)).await;
        // the other side of the same lock: a read is excluded by a write
        let rival = match opts.mode_value() {
            tower_lock::Mode::Read => LockOptions::write(),
            _ => *opts,
        };
        lost_at_ceiling(&held, max_hold).await;
        taken_over(&other, &key, &rival, &held).await;
        assert!(held.guard.release().await.is_err(), "its hold had ended");
    }
}

/// A ceiling below the manager's lease (5 s) cuts the lease itself: the server frees the lock at
/// the ceiling, so another manager gets it within a wait (2 s) shorter than the lease.
async fn a_ceiling_below_the_lease_cuts_the_lease(fx: Fixture) {
    let (holder, other) = managers(&fx, Duration::from_secs(5)).await;
    let max_hold = Duration::from_millis(300);
    for (i, opts) in [LockOptions::exclusive(), LockOptions::read()]
        .iter()
        .enumerate()
    {
        let key = format!("short:{i}");
        let held = timed(&holder, &key, &opts.max_hold(max_hold)).await;
        lost_at_ceiling(&held, max_hold).await;
        let within_lease = LockOptions::write().wait_timeout(Duration::from_secs(2));
        let rival = match opts.mode_value() {
            tower_lock::Mode::Read => within_lease,
            _ => within_lease.mode(tower_lock::Mode::Exclusive),
        };
        let next = other
            .acquire(&key, &rival)
            .await
            .expect("freed at the ceiling");
        assert!(next.fencing_token() > held.guard.fencing_token());
        next.release().await.expect("release");
    }
}

/// With a lease of 3 s the watchdog renews at 1 s; a ceiling of 1.5 s cuts that renewal to end
/// at the ceiling (an uncut one would keep the lock to 4 s): once the guard is lost, another
/// manager gets the lock within a wait of 1 s.
async fn renewals_are_cut_to_the_ceiling(fx: Fixture) {
    let (holder, other) = managers(&fx, Duration::from_secs(3)).await;
    let max_hold = Duration::from_millis(1500);
    let held = timed(&holder, "cut", &LockOptions::write().max_hold(max_hold)).await;
    lost_at_ceiling(&held, max_hold).await;
    let within = LockOptions::write().wait_timeout(Duration::from_secs(1));
    let next = other
        .acquire("cut", &within)
        .await
        .expect("freed at the ceiling");
    assert!(next.fencing_token() > held.guard.fencing_token());
}

/// A fixed lease longer than the ceiling is cut to it: the guard is lost at the ceiling and the
/// lock is free for the others.
async fn a_fixed_lease_is_cut_to_the_ceiling(fx: Fixture) {
    let (holder, other) = managers(&fx, SHORT_LEASE).await;
    let max_hold = Duration::from_millis(400);
    let opts = LockOptions::exclusive()
        .lease(Duration::from_secs(30))
        .max_hold(max_hold);
    let held = timed(&holder, "fixed", &opts).await;
    lost_at_ceiling(&held, max_hold).await;
    let within = LockOptions::exclusive().wait_timeout(Duration::from_secs(5));
    let next = other
        .acquire("fixed", &within)
        .await
        .expect("freed at the ceiling");
    assert!(next.fencing_token() > held.guard.fencing_token());
}

/// A zero ceiling is refused, naming the option; `Duration::MAX` is no ceiling in practice: the
/// hold outlives several renewals and is released as usual.
async fn zero_is_refused_and_duration_max_never_ends(fx: Fixture) {
    let (m, other) = managers(&fx, Duration::from_millis(300)).await;
    let zero = LockOptions::fair().max_hold(Duration::ZERO);
    match m.acquire("zero", &zero).await {
        Err(LockError::Unsupported { key, what }) => {
            assert_eq!(key, "zero");
            assert!(what.contains("max_hold"), "{what}");
        }
        other => panic!("a zero max_hold must be refused, got {other:?}"),
    }
    assert!(m.try_acquire("zero", &zero).await.is_err());
    let forever = LockOptions::exclusive().max_hold(Duration::MAX);
    let guard = m.acquire("max", &forever).await.expect("acquire");
    tokio::time::sleep(Duration::from_millis(1000)).await;
    assert!(!guard.is_lost(), "renewed past several leases");
    let busy = LockOptions::exclusive().wait_timeout(Duration::ZERO);
    assert!(other.acquire("max", &busy).await.is_err(), "still held");
    guard.release().await.expect("release");
    let free = LockOptions::exclusive().wait_timeout(GENEROUS);
    let next = other
        .acquire("max", &free)
        .await
        .expect("free once released");
    next.release().await.expect("release");
}
