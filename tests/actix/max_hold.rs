//! The actix-web middleware's `max_hold`, through a real actix-web server on loopback and a real
//! redis-server: a handler that would hold its lock forever loses it at the ceiling, and the
//! middleware answers as `OnLeaseLost::Abort` says.

use std::time::{Duration, Instant};

use actix_web::{web, App, HttpResponse};
use axum::http::StatusCode;
use tower_lock::{LockManager, LockOptions, OnLeaseLost};

use crate::support::{RedisServer, GENEROUS};
use crate::web::actix::{accounts, serve};
use crate::web::HttpClient;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hanging_handler_is_aborted_at_max_hold() {
    let redis = RedisServer::start();
    let lease = Duration::from_millis(600);
    let manager = || {
        LockManager::builder()
            .redis(redis.url())
            .lease(lease)
            .build()
    };
    let (m, other) = (manager().await.expect("m"), manager().await.expect("other"));
    let max_hold = Duration::from_millis(900);
    let locks = accounts(&m)
        .max_hold(max_hold)
        .on_lease_lost(OnLeaseLost::Abort);
    let server = serve(move || {
        App::new().wrap(locks.clone()).route(
            "/accounts/{id}",
            web::put().to(|| async {
                std::future::pending::<()>().await;
                HttpResponse::Ok().body("never")
            }),
        )
    });
    let sent = Instant::now();
    let reply = tokio::time::timeout(
        max_hold + GENEROUS,
        HttpClient::default().send("PUT", server.addr, "/accounts/3"),
    )
    .await
    .expect("answered at the ceiling");
    assert_eq!(reply.status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(reply.body.contains("lost"), "{}", reply.body);
    assert!(sent.elapsed() >= max_hold, "answered before the ceiling");
    let free = LockOptions::fair().wait_timeout(GENEROUS);
    let next = other.acquire("accounts/3", &free).await.expect("free");
    next.release().await.expect("release");
}
