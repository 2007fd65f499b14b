//! Read/write locks: a grant whose claim ran out before its manager took it up is dead, even when
//! the holders' record expired with it and left the grant's fields in the lock's hash. The owner's
//! next attempt must not take it up as a hold beside the lock's real holder.

use std::time::Duration;

use tower_lock::{LockManager, LockOptions};

use super::support::proxy::Proxy;
use super::support::{eventually, RedisServer};

/// A manager reaching Redis at `url`, whose grants carry a claim of 600 ms.
async fn manager(url: &str) -> LockManager {
    LockManager::builder()
        .redis(url)
        .fair_eviction(Duration::from_millis(600))
        .build()
        .await
        .expect("manager")
}

/// A write of a partitioned manager is granted; its claim runs out and the holders' record
/// expires at the same moment (as it does when it was kept alive for that claim only); another
/// manager writes. When the partition heals, the first manager's wait must not come back with a
/// hold beside the other writer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grant_whose_claim_ran_out_is_not_taken_up_later() {
    let server = RedisServer::start();
    let proxy = Proxy::start(server.port());
    let (holder, late, other) = (
        manager(&server.url()).await,
        manager(&proxy.url()).await,
        manager(&server.url()).await,
    );
    let held = holder.acquire("k", &LockOptions::write()).await.unwrap();
    let waiting = tokio::spawn({
        let late = late.clone();
        let opts = LockOptions::write().wait_timeout(Duration::from_secs(10));
        async move { late.acquire("k", &opts).await }
    });
    let queued = || server.cmd(&["LLEN", "{tower-lock:k}:qs"]).as_int() == Some(1);
    assert!(eventually(Duration::from_secs(5), queued).await);
    proxy.blackhole();
    held.release().await.unwrap();
    // the grant's claim runs out, and with it the holders' record
    tokio::time::sleep(Duration::from_millis(800)).await;
    server.cmd(&["DEL", "{tower-lock:k}:s"]);
    let opts = LockOptions::write().wait_timeout(Duration::from_secs(5));
    let writer = other.acquire("k", &opts).await.expect("the lock is free");
    proxy.heal();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(
        !waiting.is_finished(),
        "the late manager took up a dead grant beside the writer: {:?}",
        waiting.await
    );
    writer.release().await.unwrap();
    let late_write = tokio::time::timeout(Duration::from_secs(5), waiting)
        .await
        .expect("the late write got its turn")
        .unwrap()
        .unwrap();
    late_write.release().await.unwrap();
}
