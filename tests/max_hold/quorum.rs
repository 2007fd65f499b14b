//! A quorum of three real masters: a hold with a ceiling ends there on every master, and
//! another quorum manager takes the lock.

use std::time::Duration;

use tower_lock::LockOptions;

use crate::ceiling::{lost_at_ceiling, taken_over, timed, SHORT_LEASE};
use crate::support::masters::Masters;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quorum_hold_ends_at_its_ceiling() {
    let masters = Masters::start(3);
    let holder = masters.manager(SHORT_LEASE).await;
    let other = masters.manager(SHORT_LEASE).await;
    let max_hold = Duration::from_millis(1100);
    let opts = LockOptions::exclusive().max_hold(max_hold);
    let held = timed(&holder, "q", &opts).await;
    lost_at_ceiling(&held, max_hold).await;
    taken_over(&other, "q", &LockOptions::exclusive(), &held).await;
}

/// Below the lease (5 s), the ceiling cuts the lease on every master: the lock is free within a
/// wait shorter than the lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quorum_ceiling_below_the_lease_cuts_it() {
    let masters = Masters::start(3);
    let holder = masters.manager(Duration::from_secs(5)).await;
    let other = masters.manager(Duration::from_secs(5)).await;
    let max_hold = Duration::from_millis(300);
    let held = timed(&holder, "q", &LockOptions::exclusive().max_hold(max_hold)).await;
    lost_at_ceiling(&held, max_hold).await;
    let within = LockOptions::exclusive().wait_timeout(Duration::from_secs(2));
    let next = other
        .acquire("q", &within)
        .await
        .expect("freed at the ceiling");
    assert!(next.fencing_token() > held.guard.fencing_token());
}
