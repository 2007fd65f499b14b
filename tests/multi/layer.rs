//! A request's composite keys go through the same all-or-none code as a set: a request that
//! cannot have every lock answers with none of them kept.

use std::convert::Infallible;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::Full;
use tower::{service_fn, ServiceBuilder, ServiceExt};
use tower_lock::key::{self, RequestView};
use tower_lock::{LockLayer, LockOptions};

use crate::on_both_backends;
use crate::support::fixture::Fixture;

type Req = Request<Full<Bytes>>;

/// A transfer between the accounts its `x-accounts` header names (`1,2`).
fn transfer(accounts: &str) -> Req {
    Request::post("/transfers")
        .header("x-accounts", accounts)
        .body(Full::new(Bytes::new()))
        .expect("request")
}

async fn ok(_req: Req) -> Result<Response<Full<Bytes>>, Infallible> {
    Ok(Response::new(Full::new(Bytes::from_static(b"ok"))))
}

async fn a_request_refused_one_lock_keeps_none(fixture: Fixture) {
    let manager = fixture.manager().await;
    let holder = fixture.manager().await;
    let accounts = key::from_fn(|req: &dyn RequestView| {
        let names = req.header_str("x-accounts")?.split(',');
        Some(names.map(|id| format!("account:{id}")).collect::<Vec<_>>())
    });
    let layer = LockLayer::new(manager.clone(), accounts);
    let trying = ServiceBuilder::new()
        .layer(layer.clone().no_wait())
        .service(service_fn(ok));
    let waiting = ServiceBuilder::new()
        .layer(layer.wait_timeout(Duration::from_millis(200)))
        .service(service_fn(ok));
    let busy = holder
        .acquire("account:2", &LockOptions::exclusive())
        .await
        .expect("hold account 2");
    let opts = LockOptions::exclusive();
    let refused = trying.oneshot(transfer("3,2,1")).await.expect("infallible");
    assert_eq!(refused.status(), StatusCode::CONFLICT);
    // account 1, taken before account 2 was found busy, was released before the answer
    let free = holder.try_acquire("account:1", &opts).await.expect("try");
    free.expect("account 1 given back")
        .release()
        .await
        .expect("release");
    let refused = waiting.oneshot(transfer("2,1")).await.expect("infallible");
    assert_eq!(refused.status(), StatusCode::SERVICE_UNAVAILABLE);
    let free = holder.try_acquire("account:1", &opts).await.expect("try");
    assert!(free.is_some(), "account 1 given back after the timeout");
    assert_eq!(manager.waiting(), 0);
    drop(busy);
}

on_both_backends!(a_request_refused_one_lock_keeps_none);
