//! Exclusive mode on Redis: a release tells a waiting manager only when the lock is marked as
//! waited for. A wake-up that finds nobody is passed on, and marks a lock taken meanwhile, so that
//! its release still reaches the managers left waiting; the waiting record never outlives its use.

mod support;

use std::time::{Duration, Instant};

use support::RedisServer;
use tower_lock::{LockManager, LockOptions};

async fn manager(server: &RedisServer) -> LockManager {
    LockManager::builder()
        .redis(server.url())
        .lease(Duration::from_secs(30))
        .build()
        .await
        .expect("manager")
}

/// The inbox channels subscribed right now.
fn inbox_channels(server: &RedisServer) -> Vec<String> {
    let reply = server.cmd(&["PUBSUB", "CHANNELS", "*:inbox:*"]);
    reply.as_strings().expect("PUBSUB CHANNELS")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wake_up_nobody_takes_marks_the_lock_so_its_release_reaches_the_waiters() {
    let server = RedisServer::start();
    let holder = manager(&server).await;
    let waiting = manager(&server).await;
    let before = inbox_channels(&server);
    let idle = manager(&server).await;
    let idle_channel = inbox_channels(&server)
        .into_iter()
        .find(|c| !before.contains(c))
        .expect("the idle manager's inbox");

    let held = holder
        .acquire("acct", &LockOptions::exclusive())
        .await
        .unwrap();
    let waiter = {
        let waiting = waiting.clone();
        tokio::spawn(async move {
            let g = waiting
                .acquire("acct", &LockOptions::exclusive())
                .await
                .unwrap();
            let at = Instant::now();
            g.release().await.unwrap();
            at
        })
    };
    // The waiter's attempt found the lock busy and marked it as waited for.
    let marked = || server.cmd(&["HEXISTS", "{tower-lock:acct}", "#w"]).as_int() == Some(1);
    assert!(support::wait_until(Duration::from_secs(10), marked));
    // As if the holder had taken the lock fresh, never told of the waiter...
    assert_eq!(
        server.cmd(&["HDEL", "{tower-lock:acct}", "#w"]).as_int(),
        Some(1)
    );
    // ...and a wake-up for the lock reached a manager with nobody waiting: it passes it on.
    let told = server.cmd(&["PUBLISH", &idle_channel, "{tower-lock:acct}"]);
    assert_eq!(told.as_int(), Some(1));
    assert!(support::wait_until(Duration::from_secs(5), marked));

    let released = Instant::now();
    held.release().await.unwrap();
    let acquired = tokio::time::timeout(Duration::from_secs(5), waiter)
        .await
        .expect("the release woke the waiter (else it sleeps out the 30 s lease)")
        .unwrap();
    assert!(acquired.duration_since(released) < Duration::from_secs(2));
    drop(idle);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unwaited_lock_is_released_without_looking_for_waiters() {
    let server = RedisServer::start();
    let m = manager(&server).await;
    for _ in 0..10 {
        m.acquire("calm", &LockOptions::exclusive())
            .await
            .unwrap()
            .release()
            .await
            .unwrap();
    }
    assert_eq!(server.command_calls("zpopmin"), 0);
    assert_eq!(server.command_calls("zadd"), 0);
}

/// A lock taken by one request of a manager while another request of it still waits keeps that
/// manager in the lock's waiting record, so that the release reaches the second request. That
/// record expires some time after the lock would: should the process die, it does not stay.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_waiting_record_left_by_a_taker_with_local_waiters_expires() {
    let server = RedisServer::start();
    let holder = manager(&server).await;
    let waiting = manager(&server).await;
    let held = holder
        .acquire("k", &LockOptions::exclusive())
        .await
        .unwrap();
    let (taken, take) = tokio::sync::oneshot::channel();
    let (first, second) = {
        let (a, b) = (waiting.clone(), waiting.clone());
        (
            tokio::spawn(async move {
                let g = a.acquire("k", &LockOptions::exclusive()).await.unwrap();
                let _ = taken.send(());
                g
            }),
            tokio::spawn(async move { b.acquire("k", &LockOptions::exclusive()).await.unwrap() }),
        )
    };
    assert!(support::wait_until(Duration::from_secs(5), || waiting
        .waiting()
        == 2));
    held.release().await.unwrap();
    take.await.unwrap();
    // one request took the lock; the other still waits, and its manager is on record again
    let record = "{tower-lock:k}:w";
    assert_eq!(server.cmd(&["ZCARD", record]).as_int(), Some(1));
    let pttl = server.cmd(&["PTTL", record]).as_int().unwrap();
    assert!(pttl > 0, "the waiting record has no expiry (PTTL {pttl})");
    first.await.unwrap().release().await.unwrap();
    second.await.unwrap().release().await.unwrap();
}
