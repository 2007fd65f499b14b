//! `tower_lock::axum::params` on the route shape where locking by every parameter loses money:
//! `PUT /accounts/{id}/deposit/{amount}`. Deposits of different amounts to one account exclude
//! each other; the name is the one `key::pattern` and `Pattern::name_with` give, so a job locks
//! it too; a parameter the route lacks, or a request without a route, is a 400 with the reason.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, State};
use axum::routing::put;
use axum::Router;
use http::StatusCode;
use tower::ServiceBuilder;
use tower_lock::axum::params;
use tower_lock::{key, LockInfo, LockLayer, LockManager, LockOptions};

use crate::support::{RedisServer, GENEROUS};
use crate::web::{serve, Bank, HttpClient};

/// `PUT /accounts/{id}/deposit/{amount}`: deposits (1, whatever the amount) and answers the
/// lock's name.
async fn deposit(
    State(bank): State<Arc<Bank>>,
    Path((id, _amount)): Path<(u64, u64)>,
    lock: LockInfo,
) -> String {
    bank.deposit(id, Some(lock.fencing_token())).await;
    lock.key().to_owned()
}

fn bank(bank: &Arc<Bank>) -> Router {
    Router::new()
        .route("/accounts/{id}/deposit/{amount}", put(deposit))
        .with_state(bank.clone())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deposits_of_different_amounts_to_one_account_exclude_each_other() {
    let server = RedisServer::start();
    let ledger = Arc::new(Bank::default());
    let mut replicas = Vec::new();
    for _ in 0..2 {
        let manager = LockManager::redis(&server.url()).await.expect("manager");
        let locks = LockLayer::new(manager, params(["id"])).wait_timeout(GENEROUS);
        let app = Router::new().nest("/api", bank(&ledger).route_layer(locks));
        replicas.push(serve(app).await);
    }
    let client = HttpClient::default();

    let one = client
        .send("PUT", replicas[0], "/api/accounts/7/deposit/5")
        .await;
    assert_eq!(
        (one.status, one.body.as_str()),
        (StatusCode::OK, "api/accounts/7"),
        "the name of key::pattern(\"/api/accounts/{{id}}\")"
    );
    let puts = (0..40).map(|i| {
        let path = format!("/api/accounts/1/deposit/{}", 100 + i);
        let client = &client;
        let replica = replicas[i % 2];
        async move { client.send("PUT", replica, &path).await }
    });
    let replies = futures_util::future::join_all(puts).await;
    assert!(replies.iter().all(|r| r.status == StatusCode::OK));
    assert_eq!(ledger.balance(1), 40, "no deposit lost");
    assert_eq!(ledger.max_inside.load(Ordering::SeqCst), 1);
    let tokens = ledger.tokens(1);
    assert!(tokens.windows(2).all(|w| w[0] < w[1]), "{tokens:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_locking_the_patterns_name_excludes_the_params_layer() {
    let server = RedisServer::start();
    let manager = LockManager::redis(&server.url()).await.expect("manager");
    let job = LockManager::redis(&server.url()).await.expect("job");
    let ledger = Arc::new(Bank::default());
    let locks = LockLayer::new(manager, params(["id"]))
        .options(LockOptions::exclusive())
        .wait_timeout(Duration::from_millis(200));
    let addr = serve(Router::new().nest("/api", bank(&ledger).route_layer(locks))).await;
    let client = HttpClient::default();

    let name = key::pattern("/api/accounts/{id}")
        .name_with(&[("id", "3")])
        .expect("name");
    let held = job
        .acquire(&name, &LockOptions::exclusive())
        .await
        .expect("job holds");
    let blocked = client.send("PUT", addr, "/api/accounts/3/deposit/9").await;
    assert_eq!(
        blocked.status,
        StatusCode::SERVICE_UNAVAILABLE,
        "{}",
        blocked.body
    );
    assert_eq!(ledger.balance(3), 0);
    held.release().await.expect("release");
    let done = client.send("PUT", addr, "/api/accounts/3/deposit/9").await;
    assert_eq!((done.status, done.body), (StatusCode::OK, name));
}

#[tokio::test]
async fn a_parameter_the_route_lacks_or_no_route_is_a_400_with_the_reason() {
    let manager = LockManager::memory();
    let ledger = Arc::new(Bank::default());
    let wrong_name = LockLayer::new(manager.clone(), params(["account"]));
    let addr = serve(bank(&ledger).route_layer(wrong_name)).await;
    let client = HttpClient::default();
    let reply = client.send("PUT", addr, "/accounts/1/deposit/5").await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST);
    assert!(
        reply
            .body
            .contains("route /accounts/{id}/deposit/{amount} has no path parameter {account}"),
        "{}",
        reply.body
    );

    // around the whole router no route has matched yet: refused, unless optional
    let outside = |extractor| {
        let service = ServiceBuilder::new()
            .layer(LockLayer::new(manager.clone(), extractor))
            .service(bank(&ledger));
        Router::new().fallback_service(service)
    };
    let refuses = serve(outside(params(["id"]))).await;
    let reply = client.send("PUT", refuses, "/accounts/1/deposit/5").await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST);
    assert!(
        reply.body.contains("no axum route matched"),
        "{}",
        reply.body
    );
    let passes = serve(outside(params(["id"]).optional())).await;
    let reply = client.send("PUT", passes, "/accounts/1/deposit/5").await;
    assert_eq!(
        reply.status,
        StatusCode::INTERNAL_SERVER_ERROR,
        "passed unlocked, the handler's LockInfo refuses"
    );
    assert_eq!(ledger.balance(1), 0, "no handler ran unlocked");
}
