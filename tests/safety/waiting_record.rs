//! Exclusive mode: the record of the managers waiting for a lock lives as long as the longest
//! wait that needs it; a request with a short lease does not cut it short.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, Semaphore};
use tokio::time::Instant;
use tower_lock::{LockManager, LockOptions};

use super::support::{eventually, RedisServer};

async fn manager(server: &RedisServer, lease: Duration) -> LockManager {
    LockManager::builder()
        .redis(server.url())
        .lease(lease)
        .build()
        .await
        .unwrap()
}

/// A holder with a 40 s lease; manager A has two requests waiting, manager B one (each sleeping
/// on the holder's 40 s at most). The holder lets go: A's first request takes the lock with a
/// 1 s watchdog lease while A's second still waits, which records A as waiting again. It holds
/// for 12 s, then lets go: one of the two waiting requests must get the lock at once. (Before,
/// the taker set the record's expiry to its own lease + 10 s, and the release found nobody.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_short_lease_does_not_cut_the_waiting_record() {
    let server = RedisServer::start();
    let holder = manager(&server, Duration::from_secs(30)).await;
    let short = manager(&server, Duration::from_secs(1)).await;
    let long = manager(&server, Duration::from_secs(30)).await;
    let held = holder
        .acquire(
            "k",
            &LockOptions::exclusive().lease(Duration::from_secs(40)),
        )
        .await
        .unwrap();

    let (taken, mut takes) = mpsc::unbounded_channel();
    let let_go = Arc::new(Semaphore::new(0));
    let wait_on = |m: &LockManager, who: &'static str| {
        let (m, taken, let_go) = (m.clone(), taken.clone(), let_go.clone());
        tokio::spawn(async move {
            let g = m.acquire("k", &LockOptions::exclusive()).await.unwrap();
            taken.send((who, Instant::now())).unwrap();
            let_go.acquire().await.unwrap().forget();
            g.release().await.unwrap();
        })
    };
    let record = "{tower-lock:k}:w";
    let short_requests = [wait_on(&short, "short"), wait_on(&short, "short")];
    assert!(eventually(Duration::from_secs(5), || short.waiting() == 2).await);
    // the short-lease manager is on record first, the long one after it
    assert!(
        eventually(Duration::from_secs(5), || server
            .cmd(&["ZCARD", record])
            .as_int()
            == Some(1))
        .await
    );
    let long_request = wait_on(&long, "long");
    assert!(
        eventually(Duration::from_secs(5), || server
            .cmd(&["ZCARD", record])
            .as_int()
            == Some(2))
        .await
    );

    held.release().await.unwrap();
    let (first, _) = takes.recv().await.unwrap();
    assert_eq!(first, "short", "the longest-waiting manager was told first");
    // the long manager waits on the 40 s holder with a 30 s lease: its record must outlive both
    let pttl = server.cmd(&["PTTL", record]).as_int().unwrap();
    assert!(pttl > 40_000, "the waiting record was cut to {pttl} ms");
    // the taker holds past its own lease + 10 s, as long as the record would have lived
    tokio::time::sleep(Duration::from_secs(12)).await;
    let released = Instant::now();
    let_go.add_permits(1);
    let (_, at) = tokio::time::timeout(Duration::from_secs(10), takes.recv())
        .await
        .expect("nobody heard the release: the waiting record had expired")
        .unwrap();
    assert!(
        at.duration_since(released) < Duration::from_secs(3),
        "the next request got the lock {:?} after the release",
        at.duration_since(released)
    );
    let_go.add_permits(2);
    takes.recv().await.unwrap();
    for request in short_requests.into_iter().chain([long_request]) {
        request.await.unwrap();
    }
}
