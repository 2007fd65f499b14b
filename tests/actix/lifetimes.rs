//! The actix-web middleware through real actix-web servers on loopback (two worker threads each),
//! with the memory backend: what ends a request's hold when a client resets or closes its connection
//! (a lost lease and a streamed body: `layer::lifetimes`, on both stacks).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use actix_web::{web, App, HttpResponse};
use axum::http::StatusCode;
use tower_lock::{LockManager, LockOptions, OnLeaseLost};

use crate::support::{eventually, GENEROUS};
use crate::web::actix::{accounts, bank_routes, serve, serve_with, ServerConfig};
use crate::web::conn::{reset, send_raw, DropFlag};
use crate::web::{Bank, HttpClient};

/// A handler that reports it started, then never finishes (until its future is dropped).
fn endless_handler(
    dropped: &Arc<AtomicBool>,
) -> (
    impl Fn() -> std::pin::Pin<Box<dyn std::future::Future<Output = HttpResponse>>> + Clone,
    tokio::sync::mpsc::UnboundedReceiver<()>,
) {
    let (started_tx, started) = tokio::sync::mpsc::unbounded_channel();
    let dropped = dropped.clone();
    let handler = move || {
        let flag = DropFlag(dropped.clone());
        let started_tx = started_tx.clone();
        Box::pin(async move {
            let _flag = flag;
            let _ = started_tx.send(());
            std::future::pending::<()>().await;
            HttpResponse::Ok().body("never")
        }) as std::pin::Pin<Box<dyn std::future::Future<Output = HttpResponse>>>
    };
    (handler, started)
}

#[tokio::test]
async fn client_reset_while_waiting_withdraws_the_waiter() {
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

    let held = manager
        .acquire("accounts/1", &LockOptions::exclusive())
        .await
        .expect("hold");
    let connection = send_raw(server.addr, "PUT", "/accounts/1").await;
    assert!(eventually(GENEROUS, || manager.waiting() == 1).await);
    reset(connection);
    assert!(
        eventually(GENEROUS, || manager.waiting() == 0).await,
        "the waiter left with its client"
    );
    drop(held);
    let free = manager
        .acquire(
            "accounts/1",
            &LockOptions::exclusive().wait_timeout(GENEROUS),
        )
        .await;
    assert!(free.is_ok());
    assert_eq!(bank.balance(1), 0, "the handler never ran");
}

#[tokio::test]
async fn client_reset_while_the_handler_runs_releases_the_lock() {
    let manager = LockManager::memory();
    let dropped = Arc::new(AtomicBool::new(false));
    let (handler, mut started) = endless_handler(&dropped);
    let locks = accounts(&manager);
    let server = serve(move || {
        App::new()
            .wrap(locks.clone())
            .default_service(web::to(handler.clone()))
    });

    let connection = send_raw(server.addr, "PUT", "/accounts/9").await;
    started.recv().await.expect("the handler started");
    let busy = manager
        .try_acquire("accounts/9", &LockOptions::exclusive())
        .await;
    assert!(matches!(busy, Ok(None)), "held while the handler runs");
    reset(connection);
    let next = manager
        .acquire(
            "accounts/9",
            &LockOptions::exclusive().wait_timeout(GENEROUS),
        )
        .await;
    assert!(next.is_ok(), "released when the client went away");
    assert!(dropped.load(Ordering::SeqCst), "the handler was dropped");
}

#[tokio::test]
async fn closed_connection_releases_when_half_close_is_refused() {
    let manager = LockManager::memory();
    let dropped = Arc::new(AtomicBool::new(false));
    let (handler, mut started) = endless_handler(&dropped);
    let locks = accounts(&manager);
    let config = ServerConfig { half_closed: false };
    let server = serve_with(config, move || {
        App::new()
            .wrap(locks.clone())
            .default_service(web::to(handler.clone()))
    });

    let connection = send_raw(server.addr, "PUT", "/accounts/9").await;
    started.recv().await.expect("the handler started");
    drop(connection); // FIN
    let next = manager
        .acquire(
            "accounts/9",
            &LockOptions::exclusive().wait_timeout(GENEROUS),
        )
        .await;
    assert!(next.is_ok(), "released when the client closed");
    assert!(dropped.load(Ordering::SeqCst), "the handler was dropped");
}

/// Under `OnLeaseLost::Abort` the middleware keeps a clone of the request, to answer with if the
/// lease is lost, while the wrapped service runs; an `App`'s router (routes added with `.route`)
/// records the matched path in the request's parts, which it must have to itself. The request
/// must still be routed, run its handler, and be answered.
#[tokio::test]
async fn abort_policy_in_front_of_app_routes_runs_the_handler() {
    let manager = LockManager::memory();
    let bank = Arc::new(Bank::default());
    let locks = accounts(&manager).on_lease_lost(OnLeaseLost::Abort);
    let server = serve({
        let bank = bank.clone();
        move || {
            App::new()
                .wrap(locks.clone())
                .app_data(web::Data::new(bank.clone()))
                .route(
                    "/accounts/{id}",
                    web::put().to(
                        |id: web::Path<u64>, bank: web::Data<Arc<Bank>>| async move {
                            bank.deposit(id.into_inner(), None).await.to_string()
                        },
                    ),
                )
        }
    });
    let client = HttpClient::default();

    for expected in 1..=3 {
        let reply = tokio::time::timeout(GENEROUS, client.send("PUT", server.addr, "/accounts/1"))
            .await
            .expect("answered");
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
        assert_eq!(reply.body, expected.to_string());
    }
    assert_eq!(bank.balance(1), 3, "the handler ran for every request");
}

/// The same routes with a lease that runs out while the handler runs: the abort response comes.
#[tokio::test]
async fn abort_policy_in_front_of_app_routes_answers_503_when_the_lease_is_lost() {
    let manager = LockManager::memory();
    let dropped = Arc::new(AtomicBool::new(false));
    let (handler, mut started) = endless_handler(&dropped);
    let locks = accounts(&manager)
        .lease(Duration::from_millis(100))
        .on_lease_lost(OnLeaseLost::Abort);
    let server = serve(move || {
        App::new()
            .wrap(locks.clone())
            .route("/accounts/{id}", web::put().to(handler.clone()))
    });

    let reply = tokio::time::timeout(
        GENEROUS,
        HttpClient::default().send("PUT", server.addr, "/accounts/2"),
    )
    .await
    .expect("answered after the lease ran out");
    assert!(started.try_recv().is_ok(), "the handler ran");
    assert_eq!(reply.status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(reply.body.contains("lost"), "{}", reply.body);
    assert!(dropped.load(Ordering::SeqCst), "the handler was dropped");
}
