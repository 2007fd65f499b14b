//! Shared locks behind the layer and the actix-web middleware: read holds for the methods named by
//! `read_methods` (they run together, a write runs alone; with `cohort_order`, the reads of one
//! replica share one Redis hold), and a semaphore as a concurrency limit per key.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use tower_lock::{LockManager, LockOptions, RequestOptions};

use crate::on_both_stacks;
use crate::support::{RedisServer, GENEROUS};
use crate::web::stacks::{handler, Handler, Stack};
use crate::web::{Bank, HttpClient};

on_both_stacks!(
    reads_by_method_run_together,
    reads_that_opt_in_share_one_redis_hold,
    writes_by_method_run_alone,
    a_semaphore_limits_the_requests_inside,
    options_the_lock_cannot_share_are_a_409_saying_what_to_change,
);

/// A handler that answers 200 once `parties` requests are inside together, or 408 after `wait`.
fn meeting(parties: usize, wait: Duration) -> Handler {
    let barrier = Arc::new(tokio::sync::Barrier::new(parties));
    handler(move || {
        let barrier = barrier.clone();
        async move {
            match tokio::time::timeout(wait, barrier.wait()).await {
                Ok(_) => (StatusCode::OK, String::new()),
                Err(_) => (StatusCode::REQUEST_TIMEOUT, String::new()),
            }
        }
    })
}

async fn reads_by_method_run_together<S: Stack>() {
    let manager = LockManager::memory();
    let options = RequestOptions::new()
        .read_methods(["GET", "head"])
        .wait_timeout(GENEROUS);
    let server = S::handler(&manager, options, meeting(3, GENEROUS)).await;
    let client = HttpClient::default();
    // three reads of one account meet inside: only possible if they hold the lock at once
    let (a, b, c) = tokio::join!(
        client.send("GET", server.addr, "/accounts/1"),
        client.send("HEAD", server.addr, "/accounts/1"),
        client.send("GET", server.addr, "/accounts/1/orders"),
    );
    assert_eq!(
        (a.status, b.status, c.status),
        (StatusCode::OK, StatusCode::OK, StatusCode::OK)
    );
}

/// Three reads of one account meet inside a replica whose reads opt in to cohort order; each
/// answers how many holders Redis counts for the account's lock while all three are in: one.
async fn reads_that_opt_in_share_one_redis_hold<S: Stack>() {
    let redis = Arc::new(RedisServer::start());
    let manager = LockManager::redis(&redis.url()).await.unwrap();
    let barrier = Arc::new(tokio::sync::Barrier::new(3));
    let counting = handler(move || {
        let (barrier, redis) = (barrier.clone(), redis.clone());
        async move {
            if tokio::time::timeout(GENEROUS, barrier.wait())
                .await
                .is_err()
            {
                return (StatusCode::REQUEST_TIMEOUT, String::new());
            }
            let holders = redis.cmd(&["ZCARD", "{tower-lock:accounts/1}:s"]);
            (StatusCode::OK, format!("{:?}", holders.as_int()))
        }
    });
    let options = RequestOptions::new()
        .lock(LockOptions::read().cohort_order())
        .read_methods(["GET"])
        .wait_timeout(GENEROUS);
    let server = S::handler(&manager, options, counting).await;
    let client = HttpClient::default();
    let (a, b, c) = tokio::join!(
        client.send("GET", server.addr, "/accounts/1"),
        client.send("GET", server.addr, "/accounts/1"),
        client.send("GET", server.addr, "/accounts/1"),
    );
    for reply in [a, b, c] {
        assert_eq!(reply.status, StatusCode::OK);
        assert_eq!(reply.body, "Some(1)", "the reads took holds of their own");
    }
}

async fn writes_by_method_run_alone<S: Stack>() {
    let manager = LockManager::memory();
    let bank = Arc::new(Bank::default());
    let options = RequestOptions::new()
        .read_methods(["GET"])
        .wait_timeout(GENEROUS);
    let server = S::bank(&manager, options, &bank).await;
    let client = HttpClient::default();
    let puts = (0..20).map(|_| client.send("PUT", server.addr, "/accounts/4"));
    let gets = (0..20).map(|_| client.send("GET", server.addr, "/accounts/4"));
    let (puts, gets) = tokio::join!(
        futures_util::future::join_all(puts),
        futures_util::future::join_all(gets)
    );
    assert!(puts.iter().chain(&gets).all(|r| r.status == StatusCode::OK));
    assert_eq!(bank.balance(4), 20, "a deposit was lost");
    assert_eq!(
        bank.max_inside.load(Ordering::SeqCst),
        1,
        "writes overlapped"
    );
    // a write beside a read is refused the same way: hold a read, a PUT waits for it
    let read = manager
        .acquire("accounts/4", &LockOptions::read())
        .await
        .unwrap();
    let put = tokio::spawn({
        let (client, addr) = (client.clone(), server.addr);
        async move { client.send("PUT", addr, "/accounts/4").await }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!put.is_finished(), "the write ran beside a read");
    read.release().await.unwrap();
    assert_eq!(put.await.unwrap().status, StatusCode::OK);
    assert_eq!(bank.balance(4), 21);
}

async fn a_semaphore_limits_the_requests_inside<S: Stack>() {
    let manager = LockManager::memory();
    let (inside, most) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let counting = {
        let (inside, most) = (inside.clone(), most.clone());
        handler(move || {
            let (inside, most) = (inside.clone(), most.clone());
            async move {
                let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(20)).await;
                inside.fetch_sub(1, Ordering::SeqCst);
                (StatusCode::OK, String::new())
            }
        })
    };
    let options = RequestOptions::new()
        .lock(LockOptions::semaphore(2))
        .wait_timeout(GENEROUS);
    let server = S::handler(&manager, options, counting).await;
    let client = HttpClient::default();
    let puts = (0..12).map(|_| client.send("PUT", server.addr, "/accounts/9"));
    let replies = futures_util::future::join_all(puts).await;
    assert!(
        replies.iter().all(|r| r.status == StatusCode::OK),
        "{replies:?}"
    );
    assert_eq!(
        most.load(Ordering::SeqCst),
        2,
        "not 2 requests inside at most"
    );
}

/// A job holds an account's lock as a semaphore of 2 permits, and the layer asks for 3: no meaning
/// exists for that, so the request is answered 409 with what to change (never 500), the handler
/// does not run, and nothing is left behind: with the job done, the request goes through.
async fn options_the_lock_cannot_share_are_a_409_saying_what_to_change<S: Stack>() {
    let manager = LockManager::memory();
    let options = RequestOptions::new()
        .lock(LockOptions::semaphore(3))
        .wait_timeout(GENEROUS);
    let ran = Arc::new(AtomicUsize::new(0));
    let counting = {
        let ran = ran.clone();
        handler(move || {
            ran.fetch_add(1, Ordering::SeqCst);
            async { (StatusCode::OK, String::new()) }
        })
    };
    let server = S::handler(&manager, options, counting).await;
    let job = manager
        .acquire("accounts/5", &LockOptions::semaphore(2))
        .await
        .unwrap();
    let client = HttpClient::default();
    let reply = client.send("PUT", server.addr, "/accounts/5").await;
    assert_eq!(reply.status, StatusCode::CONFLICT, "{reply:?}");
    assert!(reply.retry_after().is_none(), "{reply:?}");
    assert!(
        reply.body.contains("accounts/5") && reply.body.contains("same number of permits"),
        "{}",
        reply.body
    );
    assert_eq!(ran.load(Ordering::SeqCst), 0);
    job.release().await.unwrap();
    let reply = client.send("PUT", server.addr, "/accounts/5").await;
    assert_eq!(reply.status, StatusCode::OK, "{reply:?}");
}
