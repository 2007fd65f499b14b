//! `LockManager::shutdown`: what a process held is free for the other replicas at once, its
//! queued requests leave their queues, its background releases are sent, and its inbox closes.

use std::time::Duration;

use tower_lock::{LockError, LockManager, LockOptions};

use super::support::RedisServer;

async fn manager(server: &RedisServer) -> LockManager {
    // a long lease: a lock left behind would stay held for the whole test
    let m = LockManager::builder().lease(Duration::from_secs(60));
    m.redis(server.url()).build().await.expect("redis manager")
}

/// A guard alive at shutdown, one dropped just before, and a fair request queued behind another
/// manager: after `shutdown()` the other manager takes both locks with one attempt each (no wait,
/// no lease run out), the queue is empty, and the closed manager refuses new work.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shut_down_manager_leaves_nothing_held_or_queued() {
    let server = RedisServer::start();
    let (leaving, staying) = (manager(&server).await, manager(&server).await);
    let kept = leaving
        .acquire("kept", &LockOptions::exclusive())
        .await
        .unwrap();
    let fixed = LockOptions::exclusive().lease(Duration::from_secs(60));
    let kept_fixed = leaving.acquire("fixed", &fixed).await.unwrap();
    drop(
        leaving
            .acquire("dropped", &LockOptions::exclusive())
            .await
            .unwrap(),
    );
    let holder = staying.acquire("fair", &LockOptions::fair()).await.unwrap();
    let queued = tokio::spawn({
        let leaving = leaving.clone();
        async move { leaving.acquire("fair", &LockOptions::fair()).await }
    });
    let in_queue = || server.cmd(&["LLEN", "{tower-lock:fair}:ql"]).as_int() == Some(1);
    assert!(super::support::eventually(Duration::from_secs(5), in_queue).await);
    assert_eq!(server.pubsub_clients(), 2);

    leaving.shutdown().await.expect("shutdown");

    let waited = queued.await.unwrap();
    assert!(matches!(waited, Err(LockError::Closed)), "{waited:?}");
    assert_eq!(
        server.cmd(&["LLEN", "{tower-lock:fair}:ql"]).as_int(),
        Some(0)
    );
    for key in ["kept", "fixed", "dropped"] {
        let taken = staying.try_acquire(key, &LockOptions::exclusive()).await;
        assert!(
            taken.unwrap().is_some(),
            "{key} is still held after the shutdown"
        );
    }
    assert!(kept.is_lost() && kept_fixed.is_lost());
    assert!(matches!(
        kept.release().await,
        Err(LockError::NotHeld { .. })
    ));
    drop(kept_fixed);
    let refused = leaving
        .try_acquire("other", &LockOptions::exclusive())
        .await;
    assert!(matches!(refused, Err(LockError::Closed)), "{refused:?}");
    assert_eq!(leaving.held(), 0);
    let inbox_closed = || server.pubsub_clients() == 1;
    assert!(super::support::eventually(Duration::from_secs(5), inbox_closed).await);
    holder.release().await.unwrap();
    assert!(
        leaving.shutdown().await.is_ok(),
        "a second shutdown does nothing"
    );
}

/// A request waiting for a lock held elsewhere ends with `Closed` when its manager shuts down,
/// well before its wait timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_request_ends_with_closed() {
    let server = RedisServer::start();
    let (leaving, staying) = (manager(&server).await, manager(&server).await);
    let _held = staying
        .acquire("busy", &LockOptions::exclusive())
        .await
        .unwrap();
    let opts = LockOptions::exclusive().wait_timeout(Duration::from_secs(30));
    let waiting = tokio::spawn({
        let leaving = leaving.clone();
        async move { leaving.acquire("busy", &opts).await }
    });
    let started = tokio::time::Instant::now();
    assert!(super::support::eventually(Duration::from_secs(5), || leaving.waiting() == 1).await);
    leaving.shutdown().await.unwrap();
    let outcome = waiting.await.unwrap();
    assert!(matches!(outcome, Err(LockError::Closed)), "{outcome:?}");
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(leaving.waiting(), 0);
}

/// The memory backend: a guard alive at shutdown is released, and the manager refuses new work.
#[tokio::test]
async fn a_memory_manager_releases_its_locks_at_shutdown() {
    let m = LockManager::memory();
    let guard = m.acquire("k", &LockOptions::exclusive()).await.unwrap();
    let other = m.clone();
    m.shutdown().await.unwrap();
    assert!(guard.is_lost());
    assert!(matches!(
        guard.release().await,
        Err(LockError::NotHeld { .. })
    ));
    let refused = other.acquire("k", &LockOptions::exclusive()).await;
    assert!(matches!(refused, Err(LockError::Closed)), "{refused:?}");
}
