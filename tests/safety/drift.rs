//! One server: the lost signal allows for the server's clock running fast. Redis is asked to keep
//! a lease 1% + 2 ms longer than the client counts, so the client's lost() fires before the server
//! may free the lock even when the server's clock runs up to 1% ahead.

use std::time::Duration;

use tokio::time::Instant;
use tower_lock::{LockManager, LockOptions};

use super::support::RedisServer;

/// A fixed 10 s lease: the drift allowance is 102 ms. On this machine both clocks are one, so
/// lost() must fire at least half of that before Redis frees the lock (before, the two were a
/// round trip apart, and a server clock running 0.1% fast already freed the lock first).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_fires_a_drift_allowance_before_the_server_frees_the_lock() {
    let server = RedisServer::start();
    let m = LockManager::redis(&server.url()).await.unwrap();
    let lease = Duration::from_secs(10);
    let allowance = lease / 100 + Duration::from_millis(2);
    let guard = m
        .acquire("k", &LockOptions::exclusive().lease(lease))
        .await
        .unwrap();
    let asked = Instant::now();
    let pttl = server.cmd(&["PTTL", "{tower-lock:k}"]).as_int().unwrap();
    // the server computed PTTL after `asked`: it frees the lock no sooner than this
    let server_frees = asked + Duration::from_millis(u64::try_from(pttl).unwrap());
    // half the allowance before the server frees the lock, the guard must know it may be lost
    // (is_lost() reads the deadline: a late wake-up here cannot make it wrong)
    tokio::time::sleep_until(server_frees - allowance / 2).await;
    assert!(
        guard.is_lost(),
        "{:?} before the server frees the lock, the guard is not lost (allowance {allowance:?})",
        server_frees.saturating_duration_since(Instant::now())
    );
    tokio::time::timeout(allowance, guard.lost())
        .await
        .expect("lost() resolves once the deadline passed");
}
