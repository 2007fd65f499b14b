//! A re-entry that fails must not cost the owner the hold it already has.

mod support;

use std::time::{Duration, Instant};

use support::RedisServer;
use tower_lock::{LockManager, LockOptions};

async fn manager(server: &RedisServer) -> LockManager {
    LockManager::builder()
        .redis(server.url())
        .command_timeout(Duration::from_millis(300))
        .build()
        .await
        .expect("manager")
}

/// The owner holds the lock; its connection is killed, so its re-entry fails (broken pipe) without
/// reaching Redis. The failed request's clean-up must leave the outer hold alone: another manager
/// must not get the lock while the outer guard holds it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_reentry_leaves_the_outer_hold_in_place() {
    let server = RedisServer::start();
    for (mode, opts) in [
        ("fair", LockOptions::fair()),
        ("exclusive", LockOptions::exclusive()),
    ] {
        let m = manager(&server).await;
        let other = manager(&server).await;
        let owner = m.owner();
        let outer = owner.acquire(mode, &opts).await.unwrap();
        server.cmd(&["CLIENT", "KILL", "TYPE", "normal"]);
        let reentry = owner.acquire(mode, &opts).await;
        assert!(
            reentry.is_err(),
            "{mode}: the re-entry went through a killed connection"
        );
        // the failed request's clean-up runs in the background: watch the lock for a while
        let until = Instant::now() + Duration::from_millis(500);
        while Instant::now() < until {
            let stolen = other.try_acquire(mode, &opts).await.unwrap();
            assert!(
                stolen.is_none(),
                "{mode}: another manager took the held lock"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(!outer.is_lost());
        outer.release().await.unwrap();
        assert!(other.try_acquire(mode, &opts).await.unwrap().is_some());
    }
}
