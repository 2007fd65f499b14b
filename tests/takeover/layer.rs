//! Takeover through the layer of an axum router: a request that waits for a lock whose holder
//! process was killed gets 200 within seconds, not a 503 a lease later, on one server, a
//! cluster and a quorum.

use std::process::Child;
use std::time::Instant;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use axum::routing::put;
use axum::Router;
use tower::ServiceExt;
use tower_lock::{key, LockLayer, LockOptions};

use super::quorum::quorum_manager;
use super::support::masters::Masters;
use super::support::RedisServer;
use super::{manager, spawn_child_with_token, spawn_holder, GRACE, LEASE, TAKEOVER_BOUND};

/// The child holds `accounts/7` (role "account"); a `PUT /accounts/7` through the layer waits for
/// it, and is answered 200 once the child is killed.
pub(super) async fn a_request_through_the_layer_gets_a_killed_holders_lock() {
    let server = RedisServer::start();
    let holder = spawn_holder(&server, "account");
    let m = manager(&server.url()).await;
    answered_once_the_holder_is_killed(holder, m).await;
}

/// As above, on a quorum of three masters (role "quorum account").
pub(super) async fn a_request_through_the_layer_gets_a_killed_quorum_holders_lock() {
    let masters = Masters::start(3);
    let urls = masters.urls().join(",");
    let (holder, _) = spawn_child_with_token(&urls, "quorum account");
    let m = quorum_manager(masters.urls(), true).await;
    answered_once_the_holder_is_killed(holder, m).await;
}

/// As above, on a cluster (role "cluster account").
#[cfg(feature = "cluster")]
pub(super) async fn a_request_through_the_layer_gets_a_killed_cluster_holders_lock() {
    let cluster = super::support::cluster::Cluster::start();
    let (holder, _) = spawn_child_with_token(&cluster.urls().join(","), "cluster account");
    let m = super::cluster::cluster_manager(cluster.urls()).await;
    answered_once_the_holder_is_killed(holder, m).await;
}

/// A `PUT /accounts/7` through a layer of `m` waits for the lock `holder` holds, and is answered
/// 200 within [`TAKEOVER_BOUND`] once `holder` is killed.
async fn answered_once_the_holder_is_killed(mut holder: Child, m: tower_lock::LockManager) {
    let locks = LockLayer::new(m.clone(), key::pattern("/accounts/{id}"))
        .options(LockOptions::exclusive().wait_timeout(LEASE));
    let app = Router::new()
        .route("/accounts/{id}", put(|| async { "deposited" }))
        .route_layer(locks);
    let request = Request::put("/accounts/7").body(Body::empty()).unwrap();
    let response = tokio::spawn(app.oneshot(request));
    tokio::time::sleep(GRACE * 3).await;
    assert!(!response.is_finished(), "the live holder was taken over");
    holder.kill().expect("SIGKILL the holder");
    holder.wait().expect("reap");
    let killed = Instant::now();
    let response = response.await.unwrap().unwrap();
    let took = killed.elapsed();
    assert_eq!(response.status(), StatusCode::OK);
    assert!(took < TAKEOVER_BOUND, "answered after {took:?}");
}
