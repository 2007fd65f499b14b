//! A renewal never shortens a lease that another hold of the same owner needs: re-entry with a
//! fixed lease and the watchdog lease, in either order, on both backends.

use std::time::Duration;

use tokio::time::Instant;
use tower_lock::{LockGuard, LockManager, LockOptions};

use super::support::RedisServer;

/// The watchdog lease of these tests: renewals every 500 ms.
const WATCHDOG_LEASE: Duration = Duration::from_millis(1500);
/// The fixed lease, much longer than the watchdog lease.
const FIXED_LEASE: Duration = Duration::from_secs(6);

async fn managers(server: Option<&RedisServer>) -> (LockManager, LockManager) {
    let Some(server) = server else {
        let m = LockManager::builder()
            .lease(WATCHDOG_LEASE)
            .build()
            .await
            .unwrap();
        return (m.clone(), m);
    };
    let build = || async {
        LockManager::builder()
            .redis(server.url())
            .lease(WATCHDOG_LEASE)
            .build()
            .await
            .unwrap()
    };
    (build().await, build().await)
}

/// Until `guard`'s lease is lost, nobody else may take `key`.
async fn nobody_else_takes_it_while_held(other: &LockManager, key: &str, guard: &LockGuard) {
    let deadline = Instant::now() + FIXED_LEASE + Duration::from_secs(5);
    while !guard.is_lost() {
        let stolen = other
            .try_acquire(key, &LockOptions::exclusive())
            .await
            .unwrap();
        assert!(
            stolen.is_none() || guard.is_lost(),
            "{key}: another owner took the lock while the remaining hold was not lost"
        );
        assert!(
            Instant::now() < deadline,
            "{key}: the fixed lease never ran out"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn fixed_outer_watchdog_inner(server: Option<&RedisServer>) {
    let (m, other) = managers(server).await;
    let owner = m.owner();
    let fixed = LockOptions::exclusive().lease(FIXED_LEASE);
    let outer = owner.acquire("fixed-outer", &fixed).await.unwrap();
    let inner = owner
        .acquire("fixed-outer", &LockOptions::exclusive())
        .await
        .unwrap();
    assert_eq!(inner.fencing_token(), outer.fencing_token());
    // a few watchdog renewals of the inner hold's lease
    tokio::time::sleep(WATCHDOG_LEASE).await;
    inner.release().await.unwrap();
    nobody_else_takes_it_while_held(&other, "fixed-outer", &outer).await;
}

async fn watchdog_outer_fixed_inner(server: Option<&RedisServer>) {
    let (m, other) = managers(server).await;
    let owner = m.owner();
    let outer = owner
        .acquire("watchdog-outer", &LockOptions::exclusive())
        .await
        .unwrap();
    let fixed = LockOptions::exclusive().lease(FIXED_LEASE);
    let inner = owner.acquire("watchdog-outer", &fixed).await.unwrap();
    tokio::time::sleep(WATCHDOG_LEASE).await;
    outer.release().await.unwrap();
    nobody_else_takes_it_while_held(&other, "watchdog-outer", &inner).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renewal_never_shortens_a_longer_fixed_hold_redis() {
    let server = RedisServer::start();
    tokio::join!(
        fixed_outer_watchdog_inner(Some(&server)),
        watchdog_outer_fixed_inner(Some(&server))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renewal_never_shortens_a_longer_fixed_hold_memory() {
    tokio::join!(
        fixed_outer_watchdog_inner(None),
        watchdog_outer_fixed_inner(None)
    );
}
