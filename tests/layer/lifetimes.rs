//! The lock layer under axum, through real TCP servers on loopback, with the memory backend: what
//! ends a request's hold (a client that disconnects, a lost lease, the end of a streamed body); the
//! scenarios at the end also run on actix-web (`on_both_stacks!`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::Path;
use axum::http::StatusCode;
use axum::routing::put;
use axum::Router;
use http_body_util::BodyExt;
use tower_lock::{LockManager, LockOptions, OnLeaseLost, RequestOptions};

use crate::on_both_stacks;
use crate::support::{eventually, GENEROUS};
use crate::web::conn::{send_raw, DropFlag};
use crate::web::stacks::{handler, Stack};
use crate::web::{accounts, bank_routes, exclusive_for, serve, Bank, HttpClient};

#[tokio::test]
async fn client_disconnect_while_waiting_withdraws_the_waiter() {
    let manager = LockManager::memory();
    let bank = Arc::new(Bank::default());
    let layer = accounts(&manager).wait_timeout(Duration::from_secs(60));
    let addr = serve(bank_routes(bank.clone()).layer(layer)).await;

    let held = manager
        .acquire("accounts/1", &LockOptions::exclusive())
        .await
        .expect("hold");
    let connection = send_raw(addr, "PUT", "/accounts/1").await;
    assert!(eventually(GENEROUS, || manager.waiting() == 1).await);
    drop(connection);
    assert!(
        eventually(GENEROUS, || manager.waiting() == 0).await,
        "the waiter left with its client"
    );
    drop(held);
    let free = manager
        .acquire("accounts/1", &exclusive_for(GENEROUS))
        .await;
    assert!(free.is_ok());
    assert_eq!(bank.balance(1), 0, "the handler never ran");
}

#[tokio::test]
async fn client_disconnect_while_the_handler_runs_releases_the_lock() {
    let manager = LockManager::memory();
    let dropped = Arc::new(AtomicBool::new(false));
    let (started_tx, mut started) = tokio::sync::mpsc::unbounded_channel();
    let handler = {
        let dropped = dropped.clone();
        move |Path(_id): Path<u64>| {
            let flag = DropFlag(dropped.clone());
            let started_tx = started_tx.clone();
            async move {
                let _flag = flag;
                let _ = started_tx.send(());
                std::future::pending::<()>().await;
                "never"
            }
        }
    };
    let app = Router::new()
        .route("/accounts/{id}", put(handler))
        .layer(accounts(&manager));
    let addr = serve(app).await;

    let connection = send_raw(addr, "PUT", "/accounts/9").await;
    started.recv().await.expect("the handler started");
    let busy = manager
        .try_acquire("accounts/9", &LockOptions::exclusive())
        .await;
    assert!(matches!(busy, Ok(None)), "held while the handler runs");
    drop(connection);
    let next = manager
        .acquire("accounts/9", &exclusive_for(GENEROUS))
        .await;
    assert!(next.is_ok(), "released when the client went away");
    assert!(dropped.load(Ordering::SeqCst));
}

on_both_stacks!(
    lost_lease_aborts_the_handler_with_503,
    hold_until_body_end_keeps_the_lock_while_the_body_streams,
);

async fn lost_lease_aborts_the_handler_with_503<S: Stack>() {
    let manager = LockManager::memory();
    let dropped = Arc::new(AtomicBool::new(false));
    let handler = handler({
        let dropped = dropped.clone();
        move || {
            let flag = DropFlag(dropped.clone());
            async move {
                let _flag = flag;
                std::future::pending::<()>().await;
                (StatusCode::OK, "never".to_owned())
            }
        }
    });
    let options = RequestOptions::new()
        .lease(Duration::from_millis(100))
        .on_lease_lost(OnLeaseLost::Abort);
    let server = S::handler(&manager, options, handler).await;

    let reply = tokio::time::timeout(
        GENEROUS,
        HttpClient::default().send("PUT", server.addr, "/accounts/2"),
    )
    .await
    .expect("answered after the lease ran out");
    assert_eq!(reply.status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(reply.body.contains("lost"), "{}", reply.body);
    assert!(dropped.load(Ordering::SeqCst), "the handler was dropped");
}

async fn hold_until_body_end_keeps_the_lock_while_the_body_streams<S: Stack>() {
    let manager = LockManager::memory();
    let (finish_tx, finish_rx) = tokio::sync::mpsc::unbounded_channel::<()>();
    let server = S::streams(&manager, Arc::new(tokio::sync::Mutex::new(finish_rx))).await;
    let client = HttpClient::default();
    let exclusive = LockOptions::exclusive();

    let response = client.head("GET", server.addr, "/stream/1").await;
    assert_eq!(response.status(), StatusCode::OK);
    let busy = manager.try_acquire("stream/1", &exclusive).await;
    assert!(matches!(busy, Ok(None)), "held while the body streams");
    finish_tx.send(()).expect("finish the body");
    let body = response
        .into_body()
        .collect()
        .await
        .expect("body")
        .to_bytes();
    assert_eq!(&body[..], b"first last");
    let free = manager.acquire("stream/1", &exclusive_for(GENEROUS)).await;
    assert!(free.is_ok(), "released at the end of the body");

    let response = client.head("GET", server.addr, "/plain/1").await;
    let free = manager.try_acquire("plain/1", &exclusive).await;
    assert!(
        matches!(free, Ok(Some(_))),
        "released with the response head"
    );
    drop(response);
}
