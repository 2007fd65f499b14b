//! A contended lock, as an operator finds it: a holder that took it through the direct API, and
//! behind it two waiters in queue order, the first a request waiting in the lock layer, the
//! second a direct `acquire`. Each party is a manager of its own, as each replica would be.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::Full;
use tokio::sync::Semaphore;
use tokio::task::JoinHandle;
use tower::{service_fn, ServiceBuilder, ServiceExt};
use tower_lock::{key, LockError, LockGuard, LockLayer, LockManager, LockOptions, LockState};

use crate::support::fixture::Fixture;
use crate::support::GENEROUS;

/// The lock of the scene; the layer derives it from `PUT /accounts/42`.
pub const KEY: &str = "accounts/42";

/// The parties of the contended lock.
pub struct Scene {
    /// The holder's manager.
    pub holder: LockManager,
    /// The manager of the request that waits in the layer, first in line.
    pub layer: LockManager,
    /// The manager of the direct `acquire` that waits, second in line.
    pub direct: LockManager,
    /// The holder's guard.
    pub guard: LockGuard,
    /// When the holder got the lock.
    pub held_since: Instant,
    /// The request, answered once its handler has run.
    pub request: JoinHandle<StatusCode>,
    /// A permit each time the request's handler starts, that is, holds the lock.
    pub handler_started: Arc<Semaphore>,
    /// The handler answers once it gets a permit.
    pub handler_may_answer: Arc<Semaphore>,
    /// The direct waiter's acquire.
    pub direct_wait: JoinHandle<Result<LockGuard, LockError>>,
}

/// A manager of the fixture's servers whose holds have `lease`.
pub async fn manager(fx: &Fixture, lease: Duration) -> LockManager {
    let builder = LockManager::builder().lease(lease);
    let builder = match fx {
        Fixture::Memory(_) => panic!("the scene needs separate managers"),
        Fixture::Redis(server) => builder.redis(server.url()),
        #[cfg(feature = "cluster")]
        Fixture::Cluster(cluster) => builder.cluster(cluster.urls()),
    };
    builder.build().await.expect("manager")
}

/// The state of `key` as `m` reads it, once `ready` holds (a waiter reaches the server a little
/// after its call); the last state read when it never does.
pub async fn state_when(
    m: &LockManager,
    key: &str,
    ready: impl Fn(&LockState) -> bool,
) -> LockState {
    let deadline = Instant::now() + GENEROUS;
    loop {
        let state = m.inspect(key).await.expect("inspect");
        if ready(&state) || Instant::now() > deadline {
            return state;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

impl Scene {
    /// Set the scene up: the holder (its manager's lease `lease`), then the layer's request,
    /// then the direct waiter, each queued before the next comes.
    pub async fn contended(fx: &Fixture, lease: Duration) -> Scene {
        let holder = manager(fx, lease).await;
        let (layer, direct) = (fx.manager().await, fx.manager().await);
        let guard = holder
            .acquire(KEY, &LockOptions::fair())
            .await
            .expect("hold");
        let held_since = Instant::now();
        let handler_started = Arc::new(Semaphore::new(0));
        let handler_may_answer = Arc::new(Semaphore::new(0));
        let request = tokio::spawn(request(
            layer.clone(),
            handler_started.clone(),
            handler_may_answer.clone(),
        ));
        let queued = state_when(&holder, KEY, |s| s.waiters.len() == 1).await;
        assert_eq!(queued.waiters.len(), 1, "the request waits: {queued:?}");
        let direct_wait = tokio::spawn({
            let direct = direct.clone();
            let options = LockOptions::fair().wait_timeout(GENEROUS * 3);
            async move { direct.acquire(KEY, &options).await }
        });
        let queued = state_when(&holder, KEY, |s| s.waiters.len() == 2).await;
        assert_eq!(queued.waiters.len(), 2, "both wait: {queued:?}");
        Scene {
            holder,
            layer,
            direct,
            guard,
            held_since,
            request,
            handler_started,
            handler_may_answer,
            direct_wait,
        }
    }

    /// Let every party finish: the holder releases (if it still can), the request answers, the
    /// direct waiter gets the lock and releases it.
    pub async fn finish(self) {
        self.handler_may_answer.add_permits(1);
        let _ = self.guard.release().await;
        let status = tokio::time::timeout(GENEROUS, self.request)
            .await
            .expect("the request is answered")
            .expect("request task");
        assert_eq!(status, StatusCode::OK);
        let direct = tokio::time::timeout(GENEROUS, self.direct_wait)
            .await
            .expect("the direct waiter gets the lock")
            .expect("direct task")
            .expect("acquire");
        direct.release().await.expect("release");
    }
}

/// `PUT /accounts/42` through the lock layer on `manager`; its handler signals `started`, then
/// answers once `may_answer` gives it a permit.
async fn request(
    manager: LockManager,
    started: Arc<Semaphore>,
    may_answer: Arc<Semaphore>,
) -> StatusCode {
    let layer = LockLayer::new(manager, key::pattern("/accounts/{id}")).wait_timeout(GENEROUS * 3);
    let service = ServiceBuilder::new().layer(layer).service(service_fn(
        move |_req: Request<Full<Bytes>>| {
            let (started, may_answer) = (started.clone(), may_answer.clone());
            async move {
                started.add_permits(1);
                let _answer = may_answer.acquire().await;
                Ok::<_, Infallible>(Response::new(Full::new(Bytes::from_static(b"ok"))))
            }
        },
    ));
    let request = Request::put("/accounts/42")
        .body(Full::new(Bytes::new()))
        .expect("request");
    let response = service.oneshot(request).await.expect("infallible");
    response.status()
}
