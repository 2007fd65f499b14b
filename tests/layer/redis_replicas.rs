//! The lock middleware on the Redis backend: two replicas (each with its own manager) sharing one
//! real `redis-server`, and what a client sees when Redis dies; on both stacks but one scenario.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::http::StatusCode;
use tower_lock::{LockManager, LockOptions, RequestOptions};

use crate::on_both_stacks;
use crate::support;
use crate::support::RedisServer;
use crate::web::stacks::{Layer, Server, Stack};
use crate::web::{Bank, HttpClient};

/// A manager with a short command timeout and lease: a dead Redis fails a fresh request after one
/// command timeout, and a request already waiting at its next re-check, at most one lease later.
async fn manager(server: &RedisServer) -> LockManager {
    LockManager::builder()
        .redis(server.url())
        .lease(Duration::from_secs(2))
        .command_timeout(Duration::from_millis(500))
        .build()
        .await
        .expect("redis manager")
}

/// A replica of the bank on stack `S`, locking through `manager`.
async fn replica<S: Stack>(manager: &LockManager, bank: &Arc<Bank>, wait: Duration) -> Server {
    S::bank(manager, RequestOptions::new().wait_timeout(wait), bank).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn different_accounts_do_not_wait_for_each_other_across_replicas() {
    let server = RedisServer::start();
    let (m1, m2) = (manager(&server).await, manager(&server).await);
    let bank = Arc::new(Bank::default());
    let short = Duration::from_millis(300);
    let (a, b) = (
        replica::<Layer>(&m1, &bank, short).await.addr,
        replica::<Layer>(&m2, &bank, short).await.addr,
    );
    let client = HttpClient::default();

    let _held = m1
        .acquire("accounts/1", &LockOptions::exclusive())
        .await
        .expect("hold account 1");
    let (other, same) = tokio::join!(
        client.send("PUT", b, "/accounts/2"),
        client.send("PUT", a, "/accounts/1"),
    );
    assert_eq!(other.status, StatusCode::OK);
    assert_eq!(same.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(same.retry_after(), Some("1"));
    assert_eq!((bank.balance(1), bank.balance(2)), (0, 1));
}

on_both_stacks!(
    two_replicas_lose_no_update_under_200_concurrent_puts,
    killed_redis_answers_503_promptly_never_hangs,
);

async fn two_replicas_lose_no_update_under_200_concurrent_puts<S: Stack>() {
    let server = RedisServer::start();
    let (m1, m2) = (manager(&server).await, manager(&server).await);
    // one store behind both replicas, like a shared database
    let bank = Arc::new(Bank::default());
    let wait = Duration::from_secs(60);
    let replicas = [
        replica::<S>(&m1, &bank, wait).await,
        replica::<S>(&m2, &bank, wait).await,
    ];
    let client = HttpClient::default();

    let puts = (0..200).map(|i| {
        let client = client.clone();
        let addr = replicas[i % 2].addr;
        tokio::spawn(async move { client.send("PUT", addr, "/accounts/1").await })
    });
    for reply in futures_util::future::join_all(puts).await {
        let reply = reply.expect("request task");
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    }
    assert_eq!(bank.balance(1), 200, "no update lost");
    assert_eq!(bank.max_inside.load(Ordering::SeqCst), 1);
    let tokens = bank.tokens(1);
    assert_eq!(tokens.len(), 200);
    assert!(
        tokens.windows(2).all(|w| w[0] < w[1]),
        "fencing tokens increase in write order"
    );
    assert_eq!(
        server.pubsub_clients(),
        2,
        "one pub/sub connection per manager, however many workers"
    );
}

async fn killed_redis_answers_503_promptly_never_hangs<S: Stack>() {
    let mut server = RedisServer::start();
    let (m1, m2) = (manager(&server).await, manager(&server).await);
    let bank = Arc::new(Bank::default());
    let long = Duration::from_secs(60);
    let (a, b) = (
        replica::<S>(&m1, &bank, long).await,
        replica::<S>(&m2, &bank, long).await,
    );
    let client = HttpClient::default();

    // one request waits for a lock held through the other replica's manager when Redis dies
    let _held = m2
        .acquire("accounts/5", &LockOptions::exclusive())
        .await
        .expect("hold");
    let waiting = tokio::spawn({
        let client = client.clone();
        let addr = a.addr;
        async move {
            let started = Instant::now();
            (
                client.send("PUT", addr, "/accounts/5").await,
                started.elapsed(),
            )
        }
    });
    let queued = support::eventually(Duration::from_secs(10), || m1.waiting() == 1).await;
    assert!(queued, "the request waits for the lock");
    server.kill();

    let started = Instant::now();
    let fresh = client.send("PUT", b.addr, "/accounts/6").await;
    assert_eq!(
        fresh.status,
        StatusCode::SERVICE_UNAVAILABLE,
        "{}",
        fresh.body
    );
    assert_eq!(fresh.retry_after(), Some("1"));
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );

    let (waited, elapsed) = waiting.await.expect("waiting request");
    assert_eq!(
        waited.status,
        StatusCode::SERVICE_UNAVAILABLE,
        "{}",
        waited.body
    );
    assert!(
        elapsed < Duration::from_secs(15),
        "{elapsed:?}: not the 60 s wait"
    );
    assert_eq!(bank.balance(5) + bank.balance(6), 0, "no handler ran");
}

/// A frozen Redis behind a layer whose wait timeout (300 ms) is under the command timeout (5 s):
/// the request is answered within its wait with 503 and `Retry-After`, rejected as unavailable
/// (the metrics label), not as a timeout, which would read as lock contention.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_redis_is_rejected_as_unavailable_within_the_wait() {
    use tower::ServiceExt;
    use tower_lock::{key, LockLayer, RejectReason};

    let server = RedisServer::start();
    let manager = LockManager::builder()
        .redis(server.url())
        .command_timeout(Duration::from_secs(5))
        .build()
        .await
        .expect("redis manager");
    let reasons = Arc::new(std::sync::Mutex::new(Vec::new()));
    let layer = LockLayer::new(manager, key::path())
        .wait_timeout(Duration::from_millis(300))
        .reject_with({
            let reasons = reasons.clone();
            move |rejection| {
                reasons.lock().unwrap().push(rejection.reason());
                rejection.default_response()
            }
        });
    let service =
        tower::ServiceBuilder::new()
            .layer(layer)
            .service_fn(|_req: http::Request<String>| async {
                Ok::<_, std::convert::Infallible>(http::Response::new(String::new()))
            });
    server.stop_process();
    let started = Instant::now();
    let req = http::Request::put("/accounts/1")
        .body(String::new())
        .unwrap();
    let response = service.oneshot(req).await.expect("infallible");
    let took = started.elapsed();
    server.continue_process();
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert!(response.headers().contains_key("retry-after"));
    assert!(took < Duration::from_secs(2), "{took:?}");
    assert_eq!(*reasons.lock().unwrap(), [RejectReason::Unavailable]);
}
