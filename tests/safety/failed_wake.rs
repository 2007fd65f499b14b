//! A wake-up is not lost when the attempt it leads to fails: the failing request passes it on.

use std::time::Duration;

use tokio::time::Instant;
use tower_lock::{LockManager, LockOptions};

use super::support::{eventually, RedisServer};

async fn manager(url: String) -> LockManager {
    LockManager::builder()
        .redis(url)
        .command_timeout(Duration::from_millis(500))
        .build()
        .await
        .unwrap()
}

/// A holder with a 30 s lease; a request of manager A (logged in as its own ACL user) waits, then
/// one of manager B. A loses the right to the lock's fencing counter, so when the holder lets go,
/// the release wakes A, whose attempt fails (the script's first read of the counter is refused,
/// before it writes anything). B must get the lock at once: A passes the wake-up on as it leaves
/// (before, the wake-up was spent and B slept until the holder's lease ran out). A killed
/// connection no longer makes the attempt fail: it goes out on a fresh one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_attempt_passes_its_wake_up_on() {
    let server = RedisServer::start();
    let port = server.port();
    let acl = ["ACL", "SETUSER", "a", "on", ">pw", "~*", "&*", "+@all"];
    assert!(server.cmd(&acl).is_ok());
    let holder = manager(server.url()).await;
    let a = manager(format!("redis://a:pw@127.0.0.1:{port}")).await;
    let b = manager(server.url()).await;
    let fixed = LockOptions::exclusive().lease(Duration::from_secs(30));
    let held = holder.acquire("k", &fixed).await.unwrap();

    let first = tokio::spawn({
        let a = a.clone();
        async move { a.acquire("k", &LockOptions::exclusive()).await.map(drop) }
    });
    let record = "{tower-lock:k}:w";
    let server = &server;
    let waiting = |n| move || server.cmd(&["ZCARD", record]).as_int() == Some(n);
    assert!(eventually(Duration::from_secs(5), waiting(1)).await);
    let second = tokio::spawn({
        let b = b.clone();
        async move {
            let guard = b.acquire("k", &LockOptions::exclusive()).await.unwrap();
            let at = Instant::now();
            guard.release().await.unwrap();
            at
        }
    });
    assert!(eventually(Duration::from_secs(5), waiting(2)).await);

    // every key of the lock but its fencing counter (`:f`)
    let keys = ["{tower-lock:k}", "{tower-lock:k}:w", "{tower-lock:k}:q"];
    let keys = keys.map(|key| format!("~{key}"));
    let mut acl = vec!["ACL", "SETUSER", "a", "resetkeys"];
    acl.extend(keys.iter().map(String::as_str));
    assert!(server.cmd(&acl).is_ok());
    let released = Instant::now();
    held.release().await.unwrap();
    let failed = first.await.unwrap();
    assert!(
        failed.is_err(),
        "A's woken attempt went through: {failed:?}"
    );
    let got = tokio::time::timeout(Duration::from_secs(10), second)
        .await
        .expect("B never got the lock: the wake-up was lost")
        .unwrap();
    assert!(
        got.duration_since(released) < Duration::from_secs(3),
        "B got the lock {:?} after the release",
        got.duration_since(released)
    );
}
