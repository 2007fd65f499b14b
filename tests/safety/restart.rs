//! After a Redis restart without persistence (every lock forgotten), a holder learns that its
//! lease is gone within one renewal period of the server coming back, not a period later.

use std::time::Duration;

use tokio::time::Instant;
use tower_lock::{LockManager, LockOptions};

use super::support::RedisServer;

/// A 6 s watchdog lease (renewals every 2 s); the server restarts empty 100 ms after the lock was
/// taken. The inbox sees the reconnection at once and the watchdog renews on a fresh connection:
/// lost() fires well within the 2 s renewal period. (Before, the first renewal went out on the
/// dead pooled connection and failed; only the next one, 4 s after the acquisition, found the
/// lock gone, while another process could have taken it since the restart.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_that_forgot_the_lock_is_noticed_at_once() {
    let mut server = RedisServer::start();
    let lease = Duration::from_secs(6);
    let m = LockManager::builder()
        .redis(server.url())
        .lease(lease)
        .build()
        .await
        .unwrap();
    for opts in [LockOptions::exclusive(), LockOptions::fair()] {
        let guard = m.acquire("restarted", &opts).await.unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        server.restart();
        let back = Instant::now();
        tokio::time::timeout(lease, guard.lost())
            .await
            .expect("the lease gone with the restart was never known lost");
        let noticed = back.elapsed();
        assert!(
            noticed < lease / 3,
            "lost() fired {noticed:?} after the server came back"
        );
    }
}
