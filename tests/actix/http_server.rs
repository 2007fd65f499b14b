//! The actix-web middleware through real actix-web servers on loopback (two worker threads each),
//! with the memory backend, and a real HTTP/1.1 client.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use actix_web::http::StatusCode as ActixStatus;
use actix_web::{web, App};
use axum::http::StatusCode;
use tower_lock::actix::{rejection_response, LockMiddleware};
use tower_lock::key::{self, KeyExtractor};
use tower_lock::{HeldLocks, LockInfo, LockManager, LockOptions, LockOwner, RejectReason};

use crate::support::{eventually, GENEROUS};
use crate::web::actix::{accounts, bank_routes, serve};
use crate::web::{Bank, HttpClient};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_concurrent_puts_to_one_account_lose_no_update() {
    let manager = LockManager::memory();
    let bank = Arc::new(Bank::default());
    let locks = accounts(&manager).wait_timeout(Duration::from_secs(60));
    let server = serve({
        let bank = bank.clone();
        move || {
            App::new()
                .wrap(locks.clone())
                .configure(|cfg| bank_routes(cfg, bank.clone()))
        }
    });
    let client = HttpClient::default();

    let puts = (0..200).map(|_| {
        let client = client.clone();
        let addr = server.addr;
        tokio::spawn(async move { client.send("PUT", addr, "/accounts/1").await })
    });
    for reply in futures_util::future::join_all(puts).await {
        let reply = reply.expect("request task");
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    }
    assert_eq!(bank.balance(1), 200, "no deposit lost");
    assert_eq!(bank.max_inside.load(Ordering::SeqCst), 1);
    let tokens = bank.tokens(1);
    assert_eq!(tokens.len(), 200, "every handler saw its LockInfo");
    assert!(tokens.windows(2).all(|w| w[0] < w[1]), "{tokens:?}");
}

#[tokio::test]
async fn try_mode_answers_409_with_retry_after() {
    let manager = LockManager::memory();
    let bank = Arc::new(Bank::default());
    let locks = accounts(&manager)
        .no_wait()
        .retry_after(Duration::from_secs(3));
    let server = serve({
        let bank = bank.clone();
        move || {
            App::new()
                .wrap(locks.clone())
                .configure(|cfg| bank_routes(cfg, bank.clone()))
        }
    });
    let client = HttpClient::default();

    let held = manager
        .acquire("accounts/7", &LockOptions::exclusive())
        .await
        .expect("hold");
    let reply = client.send("PUT", server.addr, "/accounts/7/x").await;
    assert_eq!(reply.status, StatusCode::CONFLICT);
    assert_eq!(reply.retry_after(), Some("3"));
    assert!(reply.body.contains("accounts/7"), "{}", reply.body);
    assert_eq!(manager.waiting(), 0, "try mode never waits");

    let other = client.send("PUT", server.addr, "/accounts/8").await;
    assert_eq!(other.status, StatusCode::OK, "other accounts are free");
    drop(held);
    let free = client.send("PUT", server.addr, "/accounts/7").await;
    assert_eq!(free.status, StatusCode::OK);
    assert_eq!(bank.balance(7), 1);
}

#[tokio::test]
async fn handlers_read_lock_info_and_owner_through_req_data_and_reenter() {
    let manager = LockManager::memory();
    async fn handler(
        owner: web::ReqData<LockOwner>,
        info: web::ReqData<LockInfo>,
        held: web::ReqData<HeldLocks>,
    ) -> String {
        let opts = LockOptions::exclusive().wait_timeout(Duration::from_millis(200));
        let again = owner.acquire(info.key(), &opts).await.expect("re-enter");
        let same_token = held
            .iter()
            .all(|h| h.fencing_token() == again.fencing_token());
        format!("{} {} {}", held.len(), info.key(), same_token)
    }
    // the same lock from the App and from the Scope: the inner one re-enters through the owner
    let strict = accounts(&manager).wait_timeout(Duration::from_millis(200));
    let server = serve(move || {
        App::new().wrap(strict.clone()).service(
            web::scope("/accounts")
                .wrap(strict.clone())
                .route("/{id}", web::put().to(handler)),
        )
    });
    let client = HttpClient::default();

    let reply = client.send("PUT", server.addr, "/accounts/5").await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    assert_eq!(reply.body, "2 accounts/5 true");
    let free = manager
        .try_acquire("accounts/5", &LockOptions::exclusive())
        .await;
    assert!(matches!(free, Ok(Some(_))), "every hold was released");
}

#[tokio::test]
async fn a_nested_middleware_on_another_manager_locks_in_its_own_manager() {
    let outer = LockManager::memory();
    let inner = LockManager::memory();
    let (outer_locks, inner_locks) = (accounts(&outer), accounts(&inner));
    let server = serve(move || {
        App::new().wrap(outer_locks.clone()).service(
            web::resource("/accounts/{id}")
                .wrap(inner_locks.clone())
                .route(
                    web::put()
                        .to(|held: web::ReqData<HeldLocks>| async move { held.len().to_string() }),
                ),
        )
    });
    let client = HttpClient::default();

    // the inner manager's lock is busy: the request must wait there, not slip through the outer one
    let held = inner
        .acquire("accounts/8", &LockOptions::exclusive())
        .await
        .expect("hold");
    let waiting = tokio::spawn({
        let client = client.clone();
        let addr = server.addr;
        async move { client.send("PUT", addr, "/accounts/8").await }
    });
    assert!(
        eventually(GENEROUS, || inner.waiting() == 1).await,
        "the inner middleware waits in its own manager"
    );
    drop(held);
    let reply = waiting.await.expect("request");
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    assert_eq!(reply.body, "2");
}

#[tokio::test]
async fn unlocked_requests_pass_and_unusable_keys_answer_400() {
    let manager = LockManager::memory();
    let bank = Arc::new(Bank::default());
    // Optional: PUT /deposit is not an account path and passes this middleware unlocked.
    let reads_free = LockMiddleware::new(
        manager.clone(),
        key::pattern("/accounts/{id}")
            .optional()
            .skip_methods(["get"]),
    )
    .wait_timeout(Duration::from_millis(50));
    let passed_unlocked = reads_free.unlocked_counter();
    let by_header = LockMiddleware::new(
        manager.clone(),
        key::header("x-account").required().prefix("account:"),
    );
    let server =
        serve({
            let bank = bank.clone();
            move || {
                App::new()
                    .wrap(reads_free.clone())
                    .configure(|cfg| bank_routes(cfg, bank.clone()))
                    .route("/health", web::get().to(|| async { "ok" }))
                    .service(web::resource("/deposit").wrap(by_header.clone()).route(
                        web::put().to(|info: web::ReqData<LockInfo>| async move {
                            info.key().to_owned()
                        }),
                    ))
            }
        });
    let client = HttpClient::default();

    let _held = manager
        .acquire("accounts/7", &LockOptions::exclusive())
        .await
        .expect("hold");
    let read = client.send("GET", server.addr, "/accounts/7").await;
    assert_eq!((read.status, read.body.as_str()), (StatusCode::OK, "read"));
    let health = client.send("GET", server.addr, "/health").await;
    assert_eq!(health.status, StatusCode::OK);
    let write = client.send("PUT", server.addr, "/accounts/7").await;
    assert_eq!(write.status, StatusCode::SERVICE_UNAVAILABLE);

    let missing = client.send("PUT", server.addr, "/deposit").await;
    assert_eq!(missing.status, StatusCode::BAD_REQUEST);
    assert_eq!(missing.retry_after(), None);
    let empty = client
        .send_with("PUT", server.addr, "/deposit", &[("x-account", " ")])
        .await;
    assert_eq!(empty.status, StatusCode::BAD_REQUEST);
    let good = client
        .send_with("PUT", server.addr, "/deposit", &[("x-account", "42")])
        .await;
    assert_eq!(
        (good.status, good.body.as_str()),
        (StatusCode::OK, "account:42")
    );
    assert_eq!(
        passed_unlocked.get(),
        3,
        "the three PUT /deposit, not the GETs"
    );
}

#[tokio::test]
async fn reject_with_replaces_the_default_response() {
    let manager = LockManager::memory();
    let locks = accounts(&manager).no_wait().reject_with(|rejection| {
        let mut response = rejection_response(rejection);
        if rejection.reason() == RejectReason::Busy {
            *response.status_mut() = ActixStatus::LOCKED;
        }
        response
    });
    let server = serve(move || {
        App::new()
            .wrap(locks.clone())
            .default_service(web::to(|| async { "done" }))
    });

    let _held = manager
        .acquire("accounts/1", &LockOptions::exclusive())
        .await
        .expect("hold");
    let reply = HttpClient::default()
        .send("PUT", server.addr, "/accounts/1")
        .await;
    assert_eq!(reply.status, StatusCode::LOCKED);
    assert_eq!(reply.retry_after(), Some("1"), "built from the default");
}
