//! The Tower middleware: [`LockLayer`] runs each request under the locks its key extractor names.
//!
//! It works wherever a tower layer does: axum's `Router::layer` and `route_layer`, tonic's
//! `Server::builder().layer(..)`, hyper services and `tower::ServiceBuilder`.
//!
//! For each request the service derives the lock names synchronously in `call`. A request the
//! extractor does not match is answered 400 with the reason; one an `.optional()` extractor does not
//! match passes, counted ([`LockLayer::unlocked_counter`]) and logged at WARN once a minute per
//! route; one the extractor names no lock for on purpose (a `from_fn` returning `None`, a method
//! left out) passes untouched, logged at DEBUG and counted in `tower_lock_unlocked_total` (feature
//! `metrics`). The future acquires the names in sorted order, then waits for the inner
//! service to be ready and calls it, and releases the locks when the response is ready (or, with
//! [`LockLayer::hold_until_body_end`], when its body ends). The layer answers some requests itself
//! — never with an error, so it fits axum's `Infallible` services:
//!
//! | what happened | HTTP | gRPC (trailers-only) |
//! |---|---|---|
//! | no usable lock name, or the extractor does not match ([`RejectReason::InvalidKey`]) | 400 | `INVALID_ARGUMENT` |
//! | the wait timed out ([`RejectReason::Timeout`]) | 503 + `Retry-After` | `UNAVAILABLE` |
//! | busy in no-wait mode ([`RejectReason::Busy`]) | 409 + `Retry-After` | `ABORTED` |
//! | too many waiters ([`RejectReason::TooManyWaiters`]) | 503 + `Retry-After` | `UNAVAILABLE` |
//! | backend unreachable ([`RejectReason::Unavailable`]) | 503 + `Retry-After` | `UNAVAILABLE` |
//! | lease lost, abort policy ([`RejectReason::LeaseLost`]) | 503 + `Retry-After` | `ABORTED` |
//! | options the lock cannot share, e.g. a semaphore of another size ([`RejectReason::Conflict`]) | 409, what to change | `FAILED_PRECONDITION` |
//! | anything else ([`RejectReason::Failed`]) | 500 | `INTERNAL` |
//!
//! [`LockLayer::reject_with`] replaces these responses. A gRPC request's `grpc-timeout` caps the wait.
//!
//! The handler finds in the request's extensions the [`LockOwner`] of the request (acquire through
//! it to re-enter the same locks; nested lock layers reuse it too), a [`LockInfo`] for the lock (key,
//! fencing token, lost signal; the first lock when there are several) and [`HeldLocks`], every lock
//! held for the request by every lock layer so far. One way to read the lock per stack:
//!
//! | stack | in the handler |
//! |---|---|
//! | axum (feature `axum`) | a `lock: LockInfo` argument (see `tower_lock::axum`) |
//! | tonic, any tower service | `request.extensions().get::<LockInfo>()`, as below |
//! | actix-web (feature `actix`) | a `lock: web::ReqData<LockInfo>` argument |
//!
//! The example below needs no feature.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use std::time::Duration;
//! use tower::{service_fn, ServiceBuilder, ServiceExt};
//! use tower_lock::key::{self, KeyExtractor};
//! use tower_lock::{LockInfo, LockLayer, LockManager, LockOptions};
//!
//! let manager = LockManager::memory();
//! let service = ServiceBuilder::new()
//!     .layer(
//!         LockLayer::new(manager.clone(), key::pattern("/accounts/{id}").skip_methods(["GET"]))
//!             .options(LockOptions::exclusive().wait_timeout(Duration::from_secs(5))),
//!     )
//!     .service(service_fn(|req: http::Request<String>| async move {
//!         let token = req.extensions().get::<LockInfo>().map(|info| info.fencing_token());
//!         Ok::<_, std::convert::Infallible>(http::Response::new(format!("{token:?}")))
//!     }));
//!
//! let req = http::Request::put("/accounts/42/orders").body(String::new())?;
//! let response = service.oneshot(req).await?;
//! assert_eq!(response.status(), 200);
//! # Ok(())
//! # }
//! ```
//!
//! [`LockOwner`]: crate::LockOwner
//! [`LockInfo`]: crate::LockInfo

mod body;
mod future;
mod options;
mod service;

use std::sync::Arc;

use bytes::Bytes;
use tower_layer::Layer;

pub use body::LockBody;
pub use future::ResponseFuture;
pub use service::LockService;

pub use crate::request::{
    HeldLocks, LeaseLostError, OnLeaseLost, RejectReason, Rejection, RequestOptions,
    UnlockedCounter, DEFAULT_RETRY_AFTER, DEFAULT_WAIT_TIMEOUT,
};

use crate::key::KeyExtractor;
use crate::manager::LockManager;
use crate::request::Policy;

/// The policy of a layer: its options, and its custom rejection response as an `http` response.
type LayerPolicy = Policy<http::Response<Bytes>>;

/// Runs each request under the locks that its key extractor derives from it: see the [module
/// docs](self).
///
/// Defaults: fair (FIFO) locks kept by the manager's watchdog (exclusive on a quorum manager), a wait of at most
/// [`DEFAULT_WAIT_TIMEOUT`] (10 s), no limit on waiters, locks released when the response head is
/// ready, the handler left running if its lease is lost, `Retry-After: 1`. Its builder methods set
/// the [`RequestOptions`] of the layer one at a time; [`request_options`](Self::request_options)
/// sets them all.
///
/// ```
/// use std::time::Duration;
/// use tower_lock::{key, LockLayer, LockManager, LockOptions, OnLeaseLost};
///
/// let layer = LockLayer::new(LockManager::memory(), key::pattern("/accounts/{id}"))
///     .options(LockOptions::exclusive().wait_timeout(Duration::from_secs(5)))
///     .max_waiters(100)
///     .on_lease_lost(OnLeaseLost::Abort);
/// ```
pub struct LockLayer<K> {
    manager: LockManager,
    extractor: Arc<K>,
    policy: Arc<LayerPolicy>,
}

impl<K> Clone for LockLayer<K> {
    fn clone(&self) -> Self {
        LockLayer {
            manager: self.manager.clone(),
            extractor: self.extractor.clone(),
            policy: self.policy.clone(),
        }
    }
}

impl<K> std::fmt::Debug for LockLayer<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LockLayer")
            .field("policy", &self.policy)
            .finish_non_exhaustive()
    }
}

impl<K: KeyExtractor> LockLayer<K> {
    /// Lock what `extractor` names in each request, through `manager` (one per process, shared by
    /// every layer: nested layers re-enter locks through the request's one owner).
    pub fn new(manager: LockManager, extractor: K) -> Self {
        LockLayer {
            manager,
            extractor: Arc::new(extractor),
            policy: Arc::new(LayerPolicy::default()),
        }
    }

    /// The number of requests this layer let through without their locks because an
    /// optional extractor (`key::pattern(..).optional()`, ...) did not match them.
    ///
    /// Every clone of the layer counts into the same counter, so keep this before handing
    /// the layer to the router. Each such request is also logged at WARN (once a minute per
    /// route) and counted in `tower_lock_unmatched_total` (feature `metrics`).
    pub fn unlocked_counter(&self) -> UnlockedCounter {
        self.policy.unlocked.counter()
    }

    /// Answer rejected requests with `reject`'s response instead of the default one (which
    /// [`Rejection::default_response`] still builds, to start from).
    ///
    /// ```
    /// use tower_lock::{key, LockLayer, LockManager, RejectReason};
    ///
    /// let layer = LockLayer::new(LockManager::memory(), key::path()).reject_with(|rejection| {
    ///     let mut response = rejection.default_response();
    ///     if rejection.reason() == RejectReason::Busy && !rejection.is_grpc() {
    ///         *response.status_mut() = http::StatusCode::LOCKED; // 423 instead of 409
    ///     }
    ///     response
    /// });
    /// ```
    pub fn reject_with<F>(mut self, reject: F) -> Self
    where
        F: Fn(&Rejection) -> http::Response<Bytes> + Send + Sync + 'static,
    {
        Arc::make_mut(&mut self.policy).reject_with(Arc::new(reject));
        self
    }
}

impl<S, K> Layer<S> for LockLayer<K> {
    type Service = LockService<S, K>;

    fn layer(&self, inner: S) -> Self::Service {
        LockService::new(
            inner,
            self.manager.clone(),
            self.extractor.clone(),
            self.policy.clone(),
        )
    }
}
