//! Takeover under Sentinel: a failover moves every inbox to the new master, where a waiter's
//! probes may find a live holder's inbox missing for a while. Such a holder keeps its hold, or
//! its `lost()` fires before anyone takes the hold over; a holder killed after the failover is
//! taken over on the new master.

use std::time::{Duration, Instant};

use tower_lock::{LockManager, LockOptions};

use super::support::sentinel::{SentinelService, SERVICE};
use super::{wait_for_held, GRACE, LEASE};

/// A manager through the Sentinels of `urls`, with the tests' lease and grace.
pub(super) async fn sentinel_manager(urls: Vec<String>) -> LockManager {
    LockManager::builder()
        .sentinel(urls, SERVICE)
        .command_timeout(Duration::from_secs(1))
        .lease(LEASE)
        .takeover_grace(GRACE)
        .build()
        .await
        .expect("manager through the Sentinels")
}

/// A live holder through a failover, while another manager waits for its lock: either nobody
/// takes the lock until it is released, or the holder's `lost()` fired before the waiter got it.
pub(super) async fn a_live_holder_is_lost_before_a_takeover_through_a_failover() {
    let service = SentinelService::start();
    let holder = sentinel_manager(service.sentinel_urls()).await;
    let other = sentinel_manager(service.sentinel_urls()).await;
    let guard = holder
        .acquire("held", &LockOptions::exclusive())
        .await
        .unwrap();
    let info = guard.info();
    let lost = tokio::spawn(async move {
        info.lost().await;
        Instant::now()
    });
    let waiter = wait_through_failover(&other);
    tokio::time::sleep(GRACE * 3).await;
    assert!(!waiter.is_finished(), "a live holder was taken over");
    service.fail_over();
    let settled = Instant::now() + GRACE * 12;
    while Instant::now() < settled && !waiter.is_finished() {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    if waiter.is_finished() {
        let got = Instant::now();
        let next = waiter.await.unwrap().expect("the waiter's lock");
        assert!(
            lost.is_finished(),
            "taken over while its holder was not told"
        );
        let lost_at = lost.await.unwrap();
        assert!(
            lost_at <= got,
            "the holder learned {:?} late",
            lost_at - got
        );
        assert!(next.fencing_token() > guard.fencing_token());
        println!("  the holder's inbox came back after the grace: lost, then taken over");
        return;
    }
    assert!(!guard.is_lost(), "lost, yet nobody took the lock over");
    println!("  the holder's inbox came back within the grace: kept");
    guard
        .release()
        .await
        .expect("still held after the failover");
    let next = waiter.await.unwrap().expect("the released lock");
    next.release().await.unwrap();
}

/// A request of `m` waiting for "held" through a failover: a wait the failover ends
/// (`Unavailable`: the old master closed the connection) waits again, until [`LEASE`] is up.
fn wait_through_failover(
    m: &LockManager,
) -> tokio::task::JoinHandle<Result<tower_lock::LockGuard, tower_lock::LockError>> {
    let m = m.clone();
    tokio::spawn(async move {
        let until = Instant::now() + LEASE;
        loop {
            let left = until.saturating_duration_since(Instant::now());
            let opts = LockOptions::exclusive().wait_timeout(left);
            match m.acquire("held", &opts).await {
                Err(tower_lock::LockError::Unavailable { .. }) if !left.is_zero() => {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                outcome => return outcome,
            }
        }
    })
}

/// A holder on the new master whose process dies is taken over there within
/// [`TAKEOVER_BOUND`](super::TAKEOVER_BOUND).
pub(super) async fn a_holder_killed_after_a_failover_is_taken_over() {
    let service = SentinelService::start();
    service.fail_over();
    let urls = service.sentinel_urls().join(",");
    let (holder, token) = super::spawn_child_with_token(&urls, "sentinel");
    let m = sentinel_manager(service.sentinel_urls()).await;
    let waiter = wait_for_held(&m, LockOptions::exclusive(), LEASE);
    tokio::time::sleep(GRACE * 3).await;
    assert!(!waiter.is_finished(), "the live holder was taken over");
    let guard = super::taken_over_once_killed(holder, waiter).await;
    assert!(guard.fencing_token() > token);
    guard.release().await.unwrap();
}
