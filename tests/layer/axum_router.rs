//! The axum integration (feature `axum`) through a real router served over TCP: `axum::route()`
//! names the lock after the matched route (nesting included) on a real redis-server, handlers take
//! `LockInfo` / `LockOwner` as extractors, and `route_layer` keeps 404s and 405s off the lock.
//! `axum::route()` is deprecated (it locks by every path parameter; `axum::params` names them):
//! these tests keep what it still promises.
#![allow(deprecated)]

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{get, put};
use axum::Router;
use tower::ServiceBuilder;
use tower_lock::axum::Route;
use tower_lock::{LockInfo, LockLayer, LockManager, LockOptions, LockOwner};

use crate::support::{RedisServer, GENEROUS};
use crate::web::{serve, Bank, HttpClient};

async fn deposit(State(bank): State<Arc<Bank>>, Path(id): Path<u64>, lock: LockInfo) -> String {
    bank.deposit(id, Some(lock.fencing_token())).await;
    lock.key().to_owned()
}

/// `PUT /accounts/{id}` deposits 1 and answers the lock's name.
fn accounts(bank: &Arc<Bank>) -> Router {
    Router::new()
        .route("/accounts/{id}", put(deposit))
        .with_state(bank.clone())
}

fn locks(manager: &LockManager, wait: Duration) -> LockLayer<Route> {
    LockLayer::new(manager.clone(), tower_lock::axum::route().required()).wait_timeout(wait)
}

/// The bank nested under `/api`, its routes locked by `axum::route()` through `route_layer`.
fn api(manager: &LockManager, bank: &Arc<Bank>, wait: Duration) -> Router {
    Router::new().nest("/api", accounts(bank).route_layer(locks(manager, wait)))
}

/// The same, with the layer on the PUT handler alone (the method router's `route_layer`).
fn api_put_only(manager: &LockManager, bank: &Arc<Bank>, wait: Duration) -> Router {
    let accounts = Router::new()
        .route(
            "/accounts/{id}",
            put(deposit).route_layer(locks(manager, wait)),
        )
        .with_state(bank.clone());
    Router::new().nest("/api", accounts)
}

async fn redis_manager(server: &RedisServer) -> LockManager {
    LockManager::redis(&server.url())
        .await
        .expect("redis manager")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lock_follows_the_nested_route_and_serializes_one_account() {
    let server = RedisServer::start();
    let manager = redis_manager(&server).await;
    let bank = Arc::new(Bank::default());
    let addr = serve(api(&manager, &bank, GENEROUS)).await;
    let client = HttpClient::default();

    let one = client.send("PUT", addr, "/api/accounts/42").await;
    assert_eq!(one.status, StatusCode::OK, "{}", one.body);
    assert_eq!(one.body, "/api/accounts/{id}?id=42");

    let puts = (0..20).map(|_| client.send("PUT", addr, "/api/accounts/1"));
    let replies = futures_util::future::join_all(puts).await;
    assert!(replies.iter().all(|r| r.status == StatusCode::OK));
    assert_eq!(bank.balance(1), 20, "no deposit lost");
    assert_eq!(bank.max_inside.load(Ordering::SeqCst), 1);
    let tokens = bank.tokens(1);
    assert!(tokens.windows(2).all(|w| w[0] < w[1]), "{tokens:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn different_accounts_do_not_wait_for_each_other() {
    let server = RedisServer::start();
    let manager = redis_manager(&server).await;
    let bank = Arc::new(Bank::default());
    let addr = serve(api(&manager, &bank, Duration::from_millis(300))).await;
    let client = HttpClient::default();

    let _held = manager
        .acquire("/api/accounts/{id}?id=1", &LockOptions::exclusive())
        .await
        .expect("hold account 1");
    let started = Instant::now();
    let other = client.send("PUT", addr, "/api/accounts/2").await;
    assert_eq!(other.status, StatusCode::OK);
    assert!(
        started.elapsed() < Duration::from_millis(300),
        "did not wait"
    );
    let same = client.send("PUT", addr, "/api/accounts/1").await;
    assert_eq!(
        same.status,
        StatusCode::SERVICE_UNAVAILABLE,
        "waited, timed out"
    );
    assert_eq!(bank.balance(1), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handlers_route_layer_answers_405_and_404_without_touching_the_lock() {
    let server = RedisServer::start();
    let manager = redis_manager(&server).await;
    let bank = Arc::new(Bank::default());
    let addr = serve(api_put_only(&manager, &bank, GENEROUS)).await;
    let client = HttpClient::default();

    // another replica holds account 7
    let elsewhere = redis_manager(&server).await;
    let _held = elsewhere
        .acquire("/api/accounts/{id}?id=7", &LockOptions::exclusive())
        .await
        .expect("hold account 7");
    let started = Instant::now();
    let post = client.send("POST", addr, "/api/accounts/7").await;
    assert_eq!(post.status, StatusCode::METHOD_NOT_ALLOWED);
    let missing = client.send("PUT", addr, "/api/nothing/7").await;
    assert_eq!(
        missing.status,
        StatusCode::NOT_FOUND,
        "not 400: no route, no layer"
    );
    assert!(started.elapsed() < GENEROUS / 2, "answered at once");
    assert_eq!(
        (manager.waiting(), manager.held()),
        (0, 0),
        "no acquisition"
    );
}

#[tokio::test]
async fn under_a_routers_layers_a_405_waits_for_the_lock() {
    // axum's `Router::route_layer` and `Router::layer` both wrap each route's whole method router,
    // its 405 answer included; only `route_layer` keeps the router's fallback (404) off the layer
    let manager = LockManager::memory();
    let bank = Arc::new(Bank::default());
    let short = Duration::from_millis(50);
    let route_layer = serve(api(&manager, &bank, short)).await;
    let layer = Router::new()
        .nest("/api", accounts(&bank))
        .layer(locks(&manager, short));
    let layer = serve(layer).await;
    let _held = manager
        .acquire("/api/accounts/{id}?id=7", &LockOptions::exclusive())
        .await
        .expect("hold account 7");
    let client = HttpClient::default();

    for addr in [route_layer, layer] {
        let post = client.send("POST", addr, "/api/accounts/7").await;
        assert_eq!(post.status, StatusCode::SERVICE_UNAVAILABLE);
    }
    let missing = client.send("PUT", route_layer, "/api/nothing").await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
    // `layer` wraps the router's fallback too, where no route matched: `required()` refuses it
    let missing = client.send("PUT", layer, "/api/nothing").await;
    assert_eq!(missing.status, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn outside_the_router_there_is_no_route() {
    let manager = LockManager::memory();
    let bank = Arc::new(Bank::default());
    let outside = |required: bool| {
        let route = tower_lock::axum::route();
        let route = if required {
            route.required()
        } else {
            route.optional()
        };
        let router = Router::new().nest("/api", accounts(&bank));
        let service = ServiceBuilder::new()
            .layer(LockLayer::new(manager.clone(), route))
            .service(router);
        Router::new().fallback_service(service)
    };
    let client = HttpClient::default();

    let passes = serve(outside(false)).await;
    let reply = client.send("PUT", passes, "/api/accounts/3").await;
    assert_eq!(
        reply.status,
        StatusCode::INTERNAL_SERVER_ERROR,
        "no LockInfo"
    );
    assert!(reply.body.contains("LockInfo"), "{}", reply.body);
    assert_eq!(bank.balance(3), 0, "the handler refused to run unlocked");

    let refuses = serve(outside(true)).await;
    let reply = client.send("PUT", refuses, "/api/accounts/3").await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn handlers_take_their_owner_and_an_optional_lock() {
    let manager = LockManager::memory();
    async fn reenter(owner: LockOwner, lock: LockInfo) -> String {
        let again = owner
            .acquire(lock.key(), &LockOptions::exclusive())
            .await
            .expect("re-enter");
        format!("{}", again.fencing_token() == lock.fencing_token())
    }
    async fn maybe(lock: Option<LockInfo>) -> String {
        format!("{}", lock.is_some())
    }
    let locks = LockLayer::new(manager.clone(), tower_lock::axum::route());
    let app = Router::new()
        .route("/reenter/{id}", put(reenter))
        .route_layer(locks)
        .route("/maybe", get(maybe));
    let addr = serve(app).await;
    let client = HttpClient::default();

    let reply = client.send("PUT", addr, "/reenter/1").await;
    assert_eq!(
        (reply.status, reply.body.as_str()),
        (StatusCode::OK, "true")
    );
    let reply = client.send("GET", addr, "/maybe").await;
    assert_eq!(
        (reply.status, reply.body.as_str()),
        (StatusCode::OK, "false")
    );
}
