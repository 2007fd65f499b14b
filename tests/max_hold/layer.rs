//! Through the tower layer, on a real redis-server: a handler that would hold its lock forever
//! loses it at the layer's `max_hold`, handled as any lost lease (`OnLeaseLost`).

use std::convert::Infallible;
use std::time::{Duration, Instant};

use http::{Request, Response, StatusCode};
use tokio::sync::oneshot;
use tower::{ServiceBuilder, ServiceExt};
use tower_lock::{key, LockInfo, LockLayer, LockOptions, OnLeaseLost};

use crate::ceiling::{SHORT_LEASE, SLACK};
use crate::direct::managers;
use crate::support::fixture::Fixture;
use crate::support::GENEROUS;

fn put(path: &str) -> Request<String> {
    Request::put(path).body(String::new()).expect("request")
}

/// With `OnLeaseLost::Abort`, a handler that never ends is dropped at the ceiling and the
/// request answered 503; another manager then takes the lock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hanging_handler_is_aborted_at_max_hold() {
    let fx = Fixture::redis();
    let (m, other) = managers(&fx, SHORT_LEASE).await;
    let max_hold = Duration::from_millis(900);
    let service = ServiceBuilder::new()
        .layer(
            LockLayer::new(m.clone(), key::path())
                .max_hold(max_hold)
                .on_lease_lost(OnLeaseLost::Abort),
        )
        .service_fn(|_req: Request<String>| async {
            std::future::pending::<()>().await;
            Ok::<_, Infallible>(Response::new(String::new()))
        });
    let sent = Instant::now();
    let answer = tokio::time::timeout(max_hold + GENEROUS, service.oneshot(put("/hang")))
        .await
        .expect("answered at the ceiling")
        .expect("infallible");
    let answered = sent.elapsed();
    assert_eq!(answer.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert!(
        answered >= max_hold,
        "answered after {answered:?}, before the ceiling"
    );
    let free = LockOptions::fair().wait_timeout(GENEROUS);
    let next = other
        .acquire("/hang", &free)
        .await
        .expect("free after the abort");
    next.release().await.expect("release");
}

/// With the default `OnLeaseLost::Continue`, the handler goes on, its `LockInfo` tells it the
/// lock was lost at the ceiling, and another manager takes the lock while it still runs: the
/// server ended the hold, though the watchdog could have kept it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_handler_learns_of_the_ceiling_and_the_lock_passes_on() {
    let fx = Fixture::redis();
    let (m, other) = managers(&fx, SHORT_LEASE).await;
    let max_hold = Duration::from_millis(900);
    let (lost_tx, lost_rx) = oneshot::channel::<(Instant, u64)>();
    let (finish_tx, finish_rx) = oneshot::channel::<()>();
    let slots = std::sync::Mutex::new(Some((lost_tx, finish_rx)));
    let slots = std::sync::Arc::new(slots);
    let service = ServiceBuilder::new()
        .layer(LockLayer::new(m.clone(), key::path()).max_hold(max_hold))
        .service_fn(move |req: Request<String>| {
            let slots = slots.clone();
            async move {
                let info = req.extensions().get::<LockInfo>().cloned().expect("locked");
                let (lost_tx, finish_rx) = slots.lock().unwrap().take().expect("one request");
                info.lost().await;
                let _ = lost_tx.send((Instant::now(), info.fencing_token()));
                let _ = finish_rx.await;
                Ok::<_, Infallible>(Response::new(String::new()))
            }
        });
    let sent = Instant::now();
    let running = tokio::spawn(service.oneshot(put("/slow")));
    let (lost_at, token) = tokio::time::timeout(max_hold + GENEROUS, lost_rx)
        .await
        .expect("lost at the ceiling")
        .expect("sent");
    assert!(lost_at >= sent + max_hold, "lost before the ceiling");
    assert!(
        lost_at.duration_since(sent) <= max_hold + SLACK + Duration::from_millis(500),
        "lost {:?} after the request was sent",
        lost_at.duration_since(sent)
    );
    let free = LockOptions::fair().wait_timeout(GENEROUS);
    let next = other
        .acquire("/slow", &free)
        .await
        .expect("taken while the handler runs");
    assert!(next.fencing_token() > token);
    assert!(!running.is_finished(), "the handler still runs");
    finish_tx.send(()).expect("handler waits");
    let answer = running.await.expect("task").expect("infallible");
    assert_eq!(answer.status(), StatusCode::OK);
}

/// A zero ceiling locks nothing: the layer refuses each request with 409, and never runs the
/// handler unlocked.
#[tokio::test]
async fn a_zero_max_hold_is_refused_per_request() {
    let m = tower_lock::LockManager::memory();
    let ran = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let service = ServiceBuilder::new()
        .layer(LockLayer::new(m.clone(), key::path()).max_hold(Duration::ZERO))
        .service_fn({
            let ran = ran.clone();
            move |_req: Request<String>| {
                ran.store(true, std::sync::atomic::Ordering::SeqCst);
                async { Ok::<_, Infallible>(Response::new(String::new())) }
            }
        });
    let answer = service.oneshot(put("/zero")).await.expect("infallible");
    assert_eq!(answer.status(), StatusCode::CONFLICT);
    assert!(
        !ran.load(std::sync::atomic::Ordering::SeqCst),
        "never unlocked"
    );
}
