//! The lock layer as a plain tower middleware (`ServiceBuilder`, `oneshot`), without a server: what
//! it promises about the inner service, composite keys, gRPC deadlines and custom rejections.

use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body::Body as _;
use http_body_util::{BodyExt, Full};
use tower::{service_fn, ServiceBuilder, ServiceExt};
use tower_lock::key::{self, RequestView};
use tower_lock::{HeldLocks, LockLayer, LockManager, LockOptions, RejectReason};

use crate::support::{eventually, GENEROUS};

type Req = Request<Full<Bytes>>;

fn request(method: &str, path: &str) -> Req {
    Request::builder()
        .method(method)
        .uri(path)
        .body(Full::new(Bytes::new()))
        .expect("request")
}

async fn ok(_req: Req) -> Result<Response<Full<Bytes>>, Infallible> {
    Ok(Response::new(Full::new(Bytes::from_static(b"ok"))))
}

#[tokio::test]
async fn waiting_for_a_lock_reserves_no_capacity_of_the_inner_service() {
    let manager = LockManager::memory();
    // the inner service takes one request at a time
    let service = ServiceBuilder::new()
        .layer(LockLayer::new(manager.clone(), key::path()).wait_timeout(Duration::from_secs(30)))
        .concurrency_limit(1)
        .service_fn(ok);

    let held = manager
        .acquire("/a", &LockOptions::exclusive())
        .await
        .expect("hold /a");
    let waiting = tokio::spawn(service.clone().oneshot(request("PUT", "/a")));
    assert!(eventually(GENEROUS, || manager.waiting() == 1).await);

    // if the waiting request had taken the inner service's only slot, this one would hang
    let other = tokio::time::timeout(
        Duration::from_secs(10),
        service.clone().oneshot(request("PUT", "/b")),
    )
    .await
    .expect("not blocked by the waiting request")
    .expect("infallible");
    assert_eq!(other.status(), StatusCode::OK);

    drop(held);
    let waited = waiting.await.expect("task").expect("infallible");
    assert_eq!(waited.status(), StatusCode::OK);
}

#[tokio::test]
async fn composite_keys_are_taken_in_sorted_order_and_never_deadlock() {
    let manager = LockManager::memory();
    // "/transfer/{from}/{to}" locks both accounts
    let transfer = key::from_fn(|req: &dyn RequestView| {
        let mut parts = req.path().trim_start_matches('/').split('/').skip(1);
        let (from, to) = (parts.next()?, parts.next()?);
        Some(vec![format!("account:{from}"), format!("account:{to}")])
    });
    let inside = Arc::new(AtomicUsize::new(0));
    let handler = {
        let inside = inside.clone();
        move |req: Req| {
            let inside = inside.clone();
            async move {
                assert_eq!(inside.fetch_add(1, Ordering::SeqCst), 0, "mutual exclusion");
                let held = req
                    .extensions()
                    .get::<HeldLocks>()
                    .cloned()
                    .unwrap_or_default();
                tokio::task::yield_now().await;
                inside.fetch_sub(1, Ordering::SeqCst);
                let keys: Vec<&str> = held.iter().map(|info| info.key()).collect();
                Ok::<_, Infallible>(Response::new(Full::new(Bytes::from(keys.join(",")))))
            }
        }
    };
    let service = ServiceBuilder::new()
        .layer(LockLayer::new(manager.clone(), transfer).wait_timeout(Duration::from_secs(30)))
        .service(service_fn(handler));

    let calls = (0..100).map(|i| {
        let path = if i % 2 == 0 {
            "/transfer/1/2"
        } else {
            "/transfer/2/1"
        };
        tokio::spawn(service.clone().oneshot(request("POST", path)))
    });
    for call in futures_util::future::join_all(calls).await {
        let response = call.expect("task").expect("infallible");
        assert_eq!(response.status(), StatusCode::OK);
        let body = response
            .into_body()
            .collect()
            .await
            .expect("body")
            .to_bytes();
        assert_eq!(&body[..], b"account:1,account:2", "sorted order");
    }
}

#[tokio::test]
async fn grpc_timeout_caps_the_wait_with_a_trailers_only_unavailable() {
    let manager = LockManager::memory();
    let service = ServiceBuilder::new()
        .layer(LockLayer::new(manager.clone(), key::path()).wait_timeout(Duration::from_secs(60)))
        .service_fn(ok);
    let _held = manager
        .acquire("/bank.Bank/Deposit", &LockOptions::exclusive())
        .await
        .expect("hold");

    let mut req = request("POST", "/bank.Bank/Deposit");
    req.headers_mut()
        .insert("content-type", "application/grpc".parse().expect("value"));
    req.headers_mut()
        .insert("grpc-timeout", "150m".parse().expect("value"));
    let started = Instant::now();
    let response = service.oneshot(req).await.expect("infallible");
    let elapsed = started.elapsed();
    assert!(elapsed >= Duration::from_millis(150), "{elapsed:?}");
    assert!(
        elapsed < Duration::from_secs(10),
        "{elapsed:?}: the deadline capped the 60 s wait"
    );
    assert_eq!(
        response.status(),
        StatusCode::OK,
        "gRPC errors travel in grpc-status"
    );
    assert_eq!(response.headers()["grpc-status"], "14");
    assert_eq!(response.headers()["content-type"], "application/grpc");
    assert!(response.body().is_end_stream(), "trailers-only: no body");
}

#[tokio::test]
async fn rejections_can_be_replaced() {
    let manager = LockManager::memory();
    let layer = LockLayer::new(manager.clone(), key::path())
        .no_wait()
        .reject_with(|rejection| {
            let mut response = rejection.default_response();
            if rejection.reason() == RejectReason::Busy {
                *response.status_mut() = StatusCode::LOCKED;
                *response.body_mut() =
                    Bytes::from(format!("locked: {}", rejection.key().unwrap_or("")));
            }
            response
        });
    let service = ServiceBuilder::new().layer(layer).service_fn(ok);
    let _held = manager
        .acquire("/doc/1", &LockOptions::exclusive())
        .await
        .expect("hold");

    let response = service
        .oneshot(request("PUT", "/doc/1"))
        .await
        .expect("infallible");
    assert_eq!(response.status(), StatusCode::LOCKED);
    assert_eq!(response.headers()["retry-after"], "1");
    let body = response
        .into_body()
        .collect()
        .await
        .expect("body")
        .to_bytes();
    assert_eq!(&body[..], b"locked: /doc/1");
}

#[tokio::test]
async fn inner_errors_pass_through_and_release_the_lock() {
    let manager = LockManager::memory();
    let failing =
        service_fn(|_req: Req| async { Err::<Response<Full<Bytes>>, &str>("inner failed") });
    let service = ServiceBuilder::new()
        .layer(LockLayer::new(manager.clone(), key::path()))
        .service(failing);

    let result = service.oneshot(request("PUT", "/x")).await;
    assert_eq!(result.err(), Some("inner failed"));
    let free = manager.try_acquire("/x", &LockOptions::exclusive()).await;
    assert!(matches!(free, Ok(Some(_))));
}
