//! The lock layer under axum, through real TCP servers on loopback, with the memory backend; the
//! scenarios at the end also run on actix-web (`on_both_stacks!`).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::http::StatusCode;
use axum::routing::{get, put};
use axum::{Extension, Router};
use tower_lock::key::{self, KeyExtractor};
use tower_lock::{
    HeldLocks, LockInfo, LockLayer, LockManager, LockOptions, LockOwner, Mode, RequestOptions,
};

use crate::on_both_stacks;
use crate::support::{eventually, GENEROUS};
use crate::web::stacks::{handler, Stack};
use crate::web::{accounts, bank_routes, exclusive_for, serve, Bank, HttpClient};

#[tokio::test]
async fn concurrent_puts_to_one_account_run_one_at_a_time() {
    let manager = LockManager::memory();
    let bank = Arc::new(Bank::default());
    let addr = serve(bank_routes(bank.clone()).layer(accounts(&manager))).await;
    let client = HttpClient::default();

    let puts = (0..50).map(|_| client.send("PUT", addr, "/accounts/1"));
    let replies = futures_util::future::join_all(puts).await;

    assert!(replies.iter().all(|r| r.status == StatusCode::OK));
    assert_eq!(bank.balance(1), 50, "no deposit lost");
    assert_eq!(bank.max_inside.load(Ordering::SeqCst), 1);
    let tokens = bank.tokens(1);
    assert!(tokens.windows(2).all(|w| w[0] < w[1]), "{tokens:?}");
}

#[tokio::test]
async fn no_wait_mode_answers_409_when_busy() {
    let manager = LockManager::memory();
    let bank = Arc::new(Bank::default());
    let layer = accounts(&manager)
        .no_wait()
        .retry_after(Duration::from_secs(3));
    let addr = serve(bank_routes(bank.clone()).layer(layer)).await;
    let client = HttpClient::default();

    let held = manager
        .acquire("accounts/7", &LockOptions::exclusive())
        .await
        .expect("hold");
    let reply = client.send("PUT", addr, "/accounts/7/x").await;
    assert_eq!(reply.status, StatusCode::CONFLICT);
    assert_eq!(reply.retry_after(), Some("3"));
    assert_eq!(manager.waiting(), 0, "try mode never waits");

    let other = client.send("PUT", addr, "/accounts/8").await;
    assert_eq!(other.status, StatusCode::OK, "other accounts are free");
    drop(held);
    assert_eq!(
        client.send("PUT", addr, "/accounts/7").await.status,
        StatusCode::OK
    );
    assert_eq!(bank.balance(7), 1);
}

#[tokio::test]
async fn unmatched_paths_and_filtered_methods_pass_without_a_lock() {
    let manager = LockManager::memory();
    let bank = Arc::new(Bank::default());
    let layer = LockLayer::new(
        manager.clone(),
        key::pattern("/accounts/{id}").skip_methods(["get"]),
    )
    .wait_timeout(Duration::from_millis(50));
    let app = bank_routes(bank.clone())
        .route("/health", get(|| async { "ok" }))
        .layer(layer);
    let addr = serve(app).await;
    let client = HttpClient::default();

    let _held = manager
        .acquire("accounts/7", &LockOptions::exclusive())
        .await
        .expect("hold");
    let read = client.send("GET", addr, "/accounts/7").await;
    assert_eq!((read.status, read.body.as_str()), (StatusCode::OK, "read"));
    let health = client.send("GET", addr, "/health").await;
    assert_eq!(health.status, StatusCode::OK);
    let write = client.send("PUT", addr, "/accounts/7").await;
    assert_eq!(write.status, StatusCode::SERVICE_UNAVAILABLE);
}

#[tokio::test]
async fn unusable_keys_answer_400() {
    let manager = LockManager::memory();
    let bank = Arc::new(Bank::default());
    let by_header = Router::new()
        .route("/deposit", put(|| async { "done" }))
        .layer(LockLayer::new(
            manager.clone(),
            key::header("x-account").required().prefix("account:"),
        ));
    let app = bank_routes(bank.clone())
        .layer(accounts(&manager))
        .merge(by_header);
    let addr = serve(app).await;
    let client = HttpClient::default();

    let missing = client.send("PUT", addr, "/deposit").await;
    assert_eq!(missing.status, StatusCode::BAD_REQUEST);
    assert_eq!(missing.retry_after(), None);
    let empty = client
        .send_with("PUT", addr, "/deposit", &[("x-account", " ")])
        .await;
    assert_eq!(empty.status, StatusCode::BAD_REQUEST);
    let good = client
        .send_with("PUT", addr, "/deposit", &[("x-account", "42")])
        .await;
    assert_eq!(good.status, StatusCode::OK);

    let too_long = format!("/accounts/{}", "9".repeat(tower_lock::key::MAX_KEY_LEN));
    let reply = client.send("PUT", addr, &too_long).await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST);
    assert!(reply.body.contains("lock key"), "{}", reply.body);
}

#[tokio::test]
async fn required_patterns_answer_400_for_paths_they_do_not_match() {
    let manager = LockManager::memory();
    let bank = Arc::new(Bank::default());
    // the outer layer's pattern omits the `/api` prefix the router nests the bank under
    let required = LockLayer::new(manager.clone(), key::pattern("/accounts/{id}").required());
    let app = Router::new()
        .nest("/api", bank_routes(bank.clone()))
        .route("/accounts/{id}", put(|| async { "top" }))
        .fallback(|| async { "fallback" })
        .layer(required);
    let addr = serve(app).await;
    let client = HttpClient::default();

    let nested = client.send("PUT", addr, "/api/accounts/1").await;
    assert_eq!(nested.status, StatusCode::BAD_REQUEST, "{}", nested.body);
    assert_eq!(bank.balance(1), 0, "the handler never ran unlocked");
    let empty_segment = client.send("PUT", addr, "/accounts//deposit/1").await;
    assert_eq!(empty_segment.status, StatusCode::BAD_REQUEST);
    let top = client.send("PUT", addr, "/accounts/1").await;
    assert_eq!((top.status, top.body.as_str()), (StatusCode::OK, "top"));
}

#[tokio::test]
async fn an_empty_path_segment_is_never_a_pattern_parameter() {
    let manager = LockManager::memory();
    // optional: what does not match passes to the fallback, so a wrong lock would show as a 503
    let layer = LockLayer::new(manager.clone(), key::pattern("/accounts/{id}").optional())
        .wait_timeout(Duration::from_millis(50));
    let app = Router::new()
        .route("/accounts/{id}", put(|| async { "account" }))
        .fallback(|| async { "fallback" })
        .layer(layer);
    let addr = serve(app).await;
    let client = HttpClient::default();

    // were `/accounts//deposit/1` locked as `accounts/deposit`, it would wait for this and get 503
    let _held = manager
        .acquire("accounts/deposit", &LockOptions::exclusive())
        .await
        .expect("hold");
    let reply = client.send("PUT", addr, "/accounts//deposit/1").await;
    assert_eq!(
        (reply.status, reply.body.as_str()),
        (StatusCode::OK, "fallback")
    );
}

#[tokio::test]
async fn nested_layers_and_the_handler_reenter_the_request_lock() {
    let manager = LockManager::memory();
    let handler = |Extension(owner): Extension<LockOwner>,
                   Extension(info): Extension<LockInfo>,
                   Extension(held): Extension<HeldLocks>| async move {
        let opts = LockOptions::exclusive().wait_timeout(Duration::from_millis(200));
        let again = owner.acquire(info.key(), &opts).await.expect("re-enter");
        let same_token = held
            .iter()
            .all(|h| h.fencing_token() == again.fencing_token());
        format!("{} {} {}", held.len(), info.key(), same_token)
    };
    let strict = || accounts(&manager).wait_timeout(Duration::from_millis(200));
    let app = Router::new()
        .route("/accounts/{id}", put(handler))
        .route_layer(strict())
        .layer(strict());
    let addr = serve(app).await;
    let client = HttpClient::default();

    let reply = client.send("PUT", addr, "/accounts/5").await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    assert_eq!(reply.body, "2 accounts/5 true");
    // every hold was released
    let free = manager
        .try_acquire("accounts/5", &LockOptions::exclusive())
        .await;
    assert!(matches!(free, Ok(Some(_))));
}

#[tokio::test]
async fn a_nested_layer_on_another_manager_locks_in_its_own_manager() {
    let outer = LockManager::memory();
    let inner = LockManager::memory();
    let handler = |Extension(held): Extension<HeldLocks>| async move { format!("{}", held.len()) };
    let app = Router::new()
        .route("/accounts/{id}", put(handler))
        .route_layer(accounts(&inner))
        .layer(accounts(&outer));
    let addr = serve(app).await;
    let client = HttpClient::default();

    // the inner manager's lock is busy: the request must wait there, not slip through the outer one
    let held = inner
        .acquire("accounts/8", &LockOptions::exclusive())
        .await
        .expect("hold");
    let waiting = tokio::spawn({
        let client = client.clone();
        async move { client.send("PUT", addr, "/accounts/8").await }
    });
    assert!(
        eventually(GENEROUS, || inner.waiting() == 1).await,
        "the inner layer waits in its own manager"
    );
    drop(held);
    let reply = waiting.await.expect("request");
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    assert_eq!(reply.body, "2");
}

on_both_stacks!(
    fair_mode_serves_concurrent_puts_one_at_a_time,
    different_accounts_run_in_parallel,
    wait_timeout_answers_503_with_retry_after,
    max_waiters_rejects_the_excess_at_once,
);

async fn fair_mode_serves_concurrent_puts_one_at_a_time<S: Stack>() {
    let manager = LockManager::memory();
    let bank = Arc::new(Bank::default());
    let options = RequestOptions::new()
        .mode(Mode::Fair)
        .wait_timeout(GENEROUS);
    let server = S::bank(&manager, options, &bank).await;
    assert_eq!(server.lock_options.mode_value(), Mode::Fair);
    let client = HttpClient::default();

    let puts = (0..30).map(|_| client.send("PUT", server.addr, "/accounts/1"));
    let replies = futures_util::future::join_all(puts).await;
    assert!(
        replies.iter().all(|r| r.status == StatusCode::OK),
        "{replies:?}"
    );
    assert_eq!(bank.balance(1), 30);
    assert_eq!(bank.max_inside.load(Ordering::SeqCst), 1);
}

async fn different_accounts_run_in_parallel<S: Stack>() {
    let manager = LockManager::memory();
    // Each handler waits for the other one: only possible if both run at once.
    let both_inside = Arc::new(tokio::sync::Barrier::new(2));
    let handler = handler(move || {
        let both_inside = both_inside.clone();
        async move {
            match tokio::time::timeout(GENEROUS, both_inside.wait()).await {
                Ok(_) => (StatusCode::OK, String::new()),
                Err(_) => (StatusCode::REQUEST_TIMEOUT, String::new()),
            }
        }
    });
    let options = RequestOptions::new().wait_timeout(Duration::from_secs(30));
    let server = S::handler(&manager, options, handler).await;
    let client = HttpClient::default();

    let (one, two) = tokio::join!(
        client.send("PUT", server.addr, "/accounts/1"),
        client.send("PUT", server.addr, "/accounts/2/orders"),
    );
    assert_eq!((one.status, two.status), (StatusCode::OK, StatusCode::OK));
}

async fn wait_timeout_answers_503_with_retry_after<S: Stack>() {
    let manager = LockManager::memory();
    let bank = Arc::new(Bank::default());
    let options = RequestOptions::new().lock(exclusive_for(Duration::from_millis(100)));
    let server = S::bank(&manager, options, &bank).await;
    let client = HttpClient::default();

    let held = manager
        .acquire("accounts/7", &LockOptions::exclusive())
        .await
        .expect("hold");
    let started = Instant::now();
    let reply = client.send("PUT", server.addr, "/accounts/7").await;
    assert_eq!(reply.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(reply.retry_after(), Some("1"));
    assert!(reply.body.contains("accounts/7"), "{}", reply.body);
    assert!(started.elapsed() >= Duration::from_millis(100));
    assert_eq!(bank.balance(7), 0, "the handler did not run");
    assert_eq!(manager.waiting(), 0);

    drop(held);
    let reply = client.send("PUT", server.addr, "/accounts/7").await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(bank.balance(7), 1);
}

async fn max_waiters_rejects_the_excess_at_once<S: Stack>() {
    let manager = LockManager::memory();
    let bank = Arc::new(Bank::default());
    let options = RequestOptions::new()
        .wait_timeout(Duration::from_secs(30))
        .max_waiters(1);
    let server = S::bank(&manager, options, &bank).await;
    let client = HttpClient::default();

    let held = manager
        .acquire("accounts/3", &LockOptions::exclusive())
        .await
        .expect("hold");
    let first = tokio::spawn({
        let client = client.clone();
        let addr = server.addr;
        async move { client.send("PUT", addr, "/accounts/3").await }
    });
    assert!(eventually(GENEROUS, || manager.waiting() == 1).await);

    // fresh connections (on actix-web, they land on either worker): every one is over the limit
    for _ in 0..4 {
        let started = Instant::now();
        let excess = HttpClient::default()
            .send("PUT", server.addr, "/accounts/3")
            .await;
        assert_eq!(excess.status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(excess.retry_after(), Some("1"));
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "rejected at once"
        );
    }
    let other = client.send("PUT", server.addr, "/accounts/4").await;
    assert_eq!(other.status, StatusCode::OK, "the limit is per key");

    drop(held);
    let first = first.await.expect("first request");
    assert_eq!(first.status, StatusCode::OK);
    assert_eq!(bank.balance(3), 1);
}
