//! A lock layer on a quorum manager: its default mode (fair) needs a queue a quorum does not
//! have, so a default layer takes exclusive locks there, while a layer told to be fair is refused
//! with 409.

use std::convert::Infallible;
use std::time::Duration;

use http::{Request, Response, StatusCode};
use tower::{ServiceBuilder, ServiceExt};
use tower_lock::{key, LockLayer, LockOptions};

use crate::support::masters::Masters;

async fn put(layer: LockLayer<key::Path>) -> StatusCode {
    let service = ServiceBuilder::new()
        .layer(layer)
        .service_fn(|_req: Request<String>| async {
            Ok::<_, Infallible>(Response::new(String::new()))
        });
    let req = Request::put("/accounts/7").body(String::new()).unwrap();
    service.oneshot(req).await.unwrap().status()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_default_layer_takes_exclusive_locks_on_a_quorum() {
    let masters = Masters::start(3);
    let m = masters.manager(Duration::from_secs(30)).await;
    let default = LockLayer::new(m.clone(), key::path());
    assert_eq!(put(default.clone()).await, StatusCode::OK);
    // the lock it takes excludes the direct API's exclusive locks
    let held = m
        .acquire("/accounts/7", &LockOptions::exclusive())
        .await
        .unwrap();
    assert_eq!(put(default.no_wait()).await, StatusCode::CONFLICT);
    held.release().await.unwrap();
    // a layer that asks for fair locks is told no (409, saying what to change: a configuration
    // to fix, not a silent exclusive lock, nor a 500)
    let fair = LockLayer::new(m.clone(), key::path()).options(LockOptions::fair());
    assert_eq!(put(fair).await, StatusCode::CONFLICT);
}
