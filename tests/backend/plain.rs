//! The plain path on a real redis-server: a free exclusive lock taken by a cohort's leader with
//! `SET NX` and no script, and how every other request and script meets such a lock.

use std::time::{Duration, Instant};

use tower_lock::{LockError, LockManager, LockOptions};

use crate::support::{self, RedisServer};

async fn manager(server: &RedisServer) -> LockManager {
    LockManager::redis(&server.url()).await.expect("manager")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_free_exclusive_lock_is_taken_without_a_script() {
    let server = RedisServer::start();
    let m = manager(&server).await;
    let warm = m.acquire("warm", &LockOptions::exclusive()).await.unwrap();
    warm.release().await.unwrap();
    let (scripts, sets) = (server.command_calls("evalsha"), server.command_calls("set"));
    let guard = m.acquire("k", &LockOptions::exclusive()).await.unwrap();
    assert_eq!(server.command_calls("evalsha"), scripts, "no script ran");
    assert_eq!(server.command_calls("set"), sets + 1);
    assert_eq!(
        server
            .cmd(&["TYPE", "{tower-lock:k}"])
            .as_string()
            .as_deref(),
        Some("string")
    );
    let holder = server.cmd(&["GET", "{tower-lock:k}"]).as_string().unwrap();
    assert!(holder.starts_with(&format!("{}:", m.id())), "{holder}");
    let now_us = server.cmd(&["TIME"]).as_strings().unwrap();
    let now_us: u64 = now_us[0].parse::<u64>().unwrap() * 1_000_000;
    assert!(
        guard.fencing_token() >= now_us - 5_000_000,
        "the token is floored by the server's clock"
    );
    guard.release().await.unwrap();
    assert_eq!(server.cmd(&["EXISTS", "{tower-lock:k}"]).as_int(), Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_of_every_mode_meet_a_plain_lock_as_a_held_exclusive_lock() {
    let server = RedisServer::start();
    let (holder, other) = (manager(&server).await, manager(&server).await);
    let held = holder
        .acquire("k", &LockOptions::exclusive())
        .await
        .unwrap();
    let token = held.fencing_token();
    let wait = Duration::from_secs(10);
    let exclusive = tokio::spawn({
        let other = other.clone();
        async move {
            let opts = LockOptions::exclusive().wait_timeout(wait);
            other.acquire("k", &opts).await
        }
    });
    let fair = tokio::spawn({
        let other = other.clone();
        async move {
            let opts = LockOptions::fair().wait_timeout(wait);
            other.acquire("k", &opts).await
        }
    });
    let read = other.acquire("k", &LockOptions::read()).await.unwrap_err();
    assert!(matches!(read, LockError::Unsupported { .. }), "{read:?}");
    assert!(other
        .try_acquire("k", &LockOptions::exclusive())
        .await
        .unwrap()
        .is_none());
    assert!(support::eventually(Duration::from_secs(5), || other.waiting() == 2).await);
    // the waiters are told at the release, long before the 30 s lease would run out
    let released = Instant::now();
    held.release().await.unwrap();
    let first = tokio::select! {
        g = exclusive => g.unwrap(),
        g = fair => g.unwrap(),
    }
    .expect("a waiter takes the released lock");
    assert!(released.elapsed() < Duration::from_secs(5));
    assert!(first.fencing_token() > token);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_attempt_gives_way_to_fair_requests_queued_for_a_free_lock() {
    let server = RedisServer::start();
    let (holder, fair, late) = (
        manager(&server).await,
        manager(&server).await,
        manager(&server).await,
    );
    let held = holder
        .acquire("k", &LockOptions::exclusive())
        .await
        .unwrap();
    let queued = tokio::spawn({
        let fair = fair.clone();
        async move { fair.acquire("k", &LockOptions::fair()).await }
    });
    assert!(support::eventually(Duration::from_secs(5), || fair.waiting() == 1).await);
    // the holder's lease runs out: the lock is free, and a fair request queues for it
    server.cmd(&["DEL", "{tower-lock:k}"]);
    let late_attempt = tokio::spawn({
        let late = late.clone();
        async move { late.acquire("k", &LockOptions::exclusive()).await }
    });
    let first = tokio::time::timeout(Duration::from_secs(10), queued)
        .await
        .expect("the queued request gets the lock")
        .unwrap()
        .unwrap();
    assert!(
        !late_attempt.is_finished(),
        "the later request waits its turn"
    );
    let first_token = first.fencing_token();
    first.release().await.unwrap();
    let second = tokio::time::timeout(Duration::from_secs(10), late_attempt)
        .await
        .expect("the later request follows")
        .unwrap()
        .unwrap();
    assert!(second.fencing_token() > first_token);
    drop(held);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_rise_across_short_plain_holds_and_scripted_ones() {
    let server = RedisServer::start();
    let (a, b) = (manager(&server).await, manager(&server).await);
    let mut last = 0;
    for i in 0..300 {
        let (m, opts) = match i % 3 {
            0 => (&a, LockOptions::exclusive()),
            1 => (&b, LockOptions::exclusive()),
            _ => (&a, LockOptions::fair()),
        };
        let guard = m.acquire("k", &opts).await.unwrap();
        let token = guard.fencing_token();
        assert!(token > last, "hold {i}: token {token} after {last}");
        last = token;
        guard.release().await.unwrap();
    }
}
