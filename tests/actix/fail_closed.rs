//! Fail-closed keys on the actix-web middleware: what a built-in extractor does not match is a
//! 400 with the reason, never a handler run unlocked; `.optional()` lets it through, counted; and
//! a job locking `Pattern::name_with` excludes the middleware's request, on Redis.

use std::sync::Arc;
use std::time::Duration;

use actix_web::{web, App};
use axum::http::StatusCode;
use tower_lock::actix::LockMiddleware;
use tower_lock::{key, LockManager, LockOptions};

use crate::support::{RedisServer, GENEROUS};
use crate::web::actix::{bank_routes, serve};
use crate::web::{Bank, HttpClient};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unmatched_requests_answer_400_with_the_reason_unless_optional() {
    let manager = LockManager::memory();
    let bank = Arc::new(Bank::default());
    let by_pattern = LockMiddleware::new(manager.clone(), key::pattern("/accounts/{id}"));
    let by_header = LockMiddleware::new(manager.clone(), key::header("x-account"));
    let optional = LockMiddleware::new(manager.clone(), key::pattern("/accounts/{id}").optional());
    let passed = optional.unlocked_counter();
    let server = serve({
        let bank = bank.clone();
        move || {
            App::new()
                .service(
                    web::scope("/strict")
                        .wrap(by_pattern.clone())
                        .configure(|cfg| bank_routes(cfg, bank.clone())),
                )
                .service(
                    web::scope("/header")
                        .wrap(by_header.clone())
                        .configure(|cfg| bank_routes(cfg, bank.clone())),
                )
                .service(
                    web::scope("/loose")
                        .wrap(optional.clone())
                        .configure(|cfg| bank_routes(cfg, bank.clone())),
                )
        }
    });
    let client = HttpClient::default();

    // the scope's prefix is part of the path the pattern sees: it does not match
    let strict = client.send("PUT", server.addr, "/strict/accounts/1").await;
    assert_eq!(strict.status, StatusCode::BAD_REQUEST);
    assert_eq!(
        strict.body,
        "cannot derive a lock key from the request: path /strict/accounts/1 does not match the \
         lock pattern /accounts/{id}\n"
    );
    let header = client.send("PUT", server.addr, "/header/accounts/1").await;
    assert_eq!(header.status, StatusCode::BAD_REQUEST);
    assert!(
        header.body.contains("header x-account is missing"),
        "{}",
        header.body
    );
    assert_eq!(bank.balance(1), 0, "no handler ran unlocked");

    for _ in 0..3 {
        let loose = client.send("PUT", server.addr, "/loose/accounts/1").await;
        assert_eq!(loose.status, StatusCode::OK);
    }
    assert_eq!(bank.balance(1), 3);
    assert_eq!(passed.get(), 3, "each unlocked request is counted");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_locking_the_helpers_name_excludes_the_middlewares_request() {
    let redis = RedisServer::start();
    let manager = LockManager::redis(&redis.url()).await.expect("manager");
    let job = LockManager::redis(&redis.url()).await.expect("job");
    let accounts = key::pattern("/accounts/{id}");
    let locks = LockMiddleware::new(manager, accounts.clone())
        .options(LockOptions::exclusive())
        .wait_timeout(Duration::from_millis(200));
    let bank = Arc::new(Bank::default());
    let server = serve({
        let bank = bank.clone();
        move || {
            App::new()
                .wrap(locks.clone())
                .configure(|cfg| bank_routes(cfg, bank.clone()))
        }
    });
    let client = HttpClient::default();

    // the route takes a number; spelled with an escape it is the same account, and the same lock
    let name = accounts.name_with(&[("id", "8")]).expect("name");
    let held = job
        .acquire(&name, &LockOptions::exclusive())
        .await
        .expect("job holds");
    let blocked = client.send("PUT", server.addr, "/accounts/%38").await;
    assert_eq!(
        blocked.status,
        StatusCode::SERVICE_UNAVAILABLE,
        "{}",
        blocked.body
    );
    assert_eq!(bank.balance(8), 0);
    held.release().await.expect("release");
    let done = tokio::time::timeout(GENEROUS, client.send("PUT", server.addr, "/accounts/8"))
        .await
        .expect("in time");
    assert_eq!(done.status, StatusCode::OK);
    assert_eq!(bank.balance(8), 1);
}
