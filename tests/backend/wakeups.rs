//! Exclusive mode on Redis: a release tells a waiting manager only when the lock is marked as
//! waited for. A wake-up that finds nobody is passed on, and marks a lock taken meanwhile, so that
//! its release still reaches the managers left waiting; the waiting record never outlives its use.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tower_lock::{LockManager, LockOptions};

use crate::support;
use crate::support::RedisServer;

/// A manager whose requests each wait in Redis: with lock cohorting on (the default), only one
/// exclusive request of a process per lock does, and the others wait for their turn in memory.
async fn manager(server: &RedisServer) -> LockManager {
    LockManager::builder()
        .redis(server.url())
        .local_handoffs(0)
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
    assert!(support::eventually(Duration::from_secs(10), marked).await);
    // As if the holder had taken the lock fresh, never told of the waiter...
    assert_eq!(
        server.cmd(&["HDEL", "{tower-lock:acct}", "#w"]).as_int(),
        Some(1)
    );
    // ...and a wake-up for the lock reached a manager with nobody waiting: it passes it on.
    let told = server.cmd(&["PUBLISH", &idle_channel, "{tower-lock:acct}"]);
    assert_eq!(told.as_int(), Some(1));
    assert!(support::eventually(Duration::from_secs(5), marked).await);

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
    // each request says when it has the lock, and lets go when the test allows it
    let (taken, mut takes) = tokio::sync::mpsc::unbounded_channel();
    let let_go = Arc::new(tokio::sync::Semaphore::new(0));
    let requests: Vec<_> = (0..2)
        .map(|_| {
            let (waiting, taken, let_go) = (waiting.clone(), taken.clone(), let_go.clone());
            tokio::spawn(async move {
                let g = waiting
                    .acquire("k", &LockOptions::exclusive())
                    .await
                    .unwrap();
                taken.send(()).unwrap();
                let_go.acquire().await.unwrap().forget();
                g.release().await.unwrap();
            })
        })
        .collect();
    assert!(support::eventually(Duration::from_secs(5), || waiting.waiting() == 2).await);
    held.release().await.unwrap();
    takes.recv().await.unwrap();
    // one request took the lock; the other still waits, and its manager is on record again
    let record = "{tower-lock:k}:w";
    assert_eq!(server.cmd(&["ZCARD", record]).as_int(), Some(1));
    let pttl = server.cmd(&["PTTL", record]).as_int().unwrap();
    assert!(pttl > 0, "the waiting record has no expiry (PTTL {pttl})");
    // the release reaches the other request
    let_go.add_permits(1);
    tokio::time::timeout(Duration::from_secs(5), takes.recv())
        .await
        .expect("the second request got the lock")
        .unwrap();
    let_go.add_permits(1);
    for request in requests {
        request.await.unwrap();
    }
}

/// A request that gives up (its wait timed out) while it was its manager's last waiter withdraws
/// the manager's waiting record in the background. A request that starts waiting right then may
/// record itself before that withdrawal reaches Redis: it must check again, so that the next
/// release still reaches it (else it sleeps until the holder's 30 s lease would have run out). On
/// one thread, the new request's attempt deterministically goes out before the withdrawal.
#[tokio::test]
async fn a_waiter_that_starts_as_another_gives_up_still_hears_the_release() {
    let server = RedisServer::start();
    let holder = manager(&server).await;
    let waiting = manager(&server).await;
    let held = holder
        .acquire("k", &LockOptions::exclusive())
        .await
        .unwrap();
    let impatient = LockOptions::exclusive().wait_timeout(Duration::from_millis(100));
    assert!(waiting.acquire("k", &impatient).await.is_err());
    let patient = LockOptions::exclusive();
    let next = waiting.acquire("k", &patient);
    tokio::pin!(next);
    // one poll: its first attempt goes out now, ahead of the withdrawal the timed-out request left
    std::future::poll_fn(|cx| {
        assert!(next.as_mut().poll(cx).is_pending());
        std::task::Poll::Ready(())
    })
    .await;
    let withdrawn = Instant::now();
    while server.cmd(&["ZCARD", "{tower-lock:k}:w"]).as_int() != Some(0) {
        assert!(
            withdrawn.elapsed() < Duration::from_secs(5),
            "never withdrawn"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let released = Instant::now();
    held.release().await.unwrap();
    let guard = tokio::time::timeout(Duration::from_secs(5), next)
        .await
        .expect("the release did not reach the new waiter")
        .unwrap();
    assert!(released.elapsed() < Duration::from_secs(2));
    guard.release().await.unwrap();
}
