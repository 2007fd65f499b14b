//! The actix-web middleware through real actix-web servers on loopback (two worker threads each),
//! with the memory backend: what ends a request's hold when a client resets or closes its connection
//! (a lost lease and a streamed body: `layer::lifetimes`, on both stacks).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use actix_web::{web, App, HttpResponse};
use tower_lock::{LockManager, LockOptions};

use crate::support::{eventually, GENEROUS};
use crate::web::actix::{accounts, bank_routes, serve, serve_with, ServerConfig};
use crate::web::conn::{reset, send_raw, DropFlag};
use crate::web::Bank;

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
