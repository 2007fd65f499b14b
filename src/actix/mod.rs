//! actix-web middleware (feature `actix`): [`LockMiddleware`] runs each request under the locks its
//! key extractor names, with the same [`LockManager`], [`LockOptions`](crate::LockOptions), key extractors and
//! rejections as the tower [`LockLayer`](crate::LockLayer).
//!
//! actix-web 4 is built on `http` 0.2 and its own service traits, so it gets this adapter rather
//! than the tower layer; what happens to a request is the same code. Wrap an `App`, a `Scope` or a
//! `Resource`:
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use std::time::Duration;
//! use actix_web::{test, web, App, HttpResponse};
//! use tower_lock::actix::LockMiddleware;
//! use tower_lock::key::{self, KeyExtractor};
//! use tower_lock::{LockInfo, LockManager, LockOptions};
//!
//! // one manager per process, built before the server (LockManager::redis(url).await? for replicas)
//! let manager = LockManager::memory();
//! let locks = LockMiddleware::new(manager.clone(), key::pattern("/accounts/{id}").skip_methods(["GET"]))
//!     .options(LockOptions::exclusive().wait_timeout(Duration::from_secs(5)));
//!
//! async fn deposit(lock: web::ReqData<LockInfo>) -> HttpResponse {
//!     // ... read, modify and write the account, passing the fencing token to the storage ...
//!     HttpResponse::Ok().body(format!("{} {}", lock.key(), lock.fencing_token()))
//! }
//!
//! let app = test::init_service(
//!     App::new()
//!         .wrap(locks.clone())
//!         .route("/accounts/{id}", web::put().to(deposit)),
//! )
//! .await;
//! let response = test::call_service(&app, test::TestRequest::put().uri("/accounts/42").to_request()).await;
//! assert_eq!(response.status(), 200);
//! let body = test::read_body(response).await;
//! assert!(body.starts_with(b"accounts/42 "));
//! # Ok(())
//! # }
//! ```
//!
//! For each request the middleware derives the lock names synchronously in `call` (no name: the
//! request passes through untouched), acquires them in sorted order, calls the wrapped service, and
//! releases the locks when its response is ready (or, with
//! [`hold_until_body_end`](LockMiddleware::hold_until_body_end), when the response body ends). It
//! answers some requests itself, with the defaults of the tower layer: 400 when no usable lock name
//! can be derived, 503 with `Retry-After` when the wait times out, 409 with `Retry-After` when a lock
//! is busy in try mode ([`no_wait`](LockMiddleware::no_wait)), 503 with `Retry-After` when too many
//! requests wait or the backend is unreachable, 503 when the lease is lost under
//! [`OnLeaseLost::Abort`](crate::OnLeaseLost::Abort); [`reject_with`](LockMiddleware::reject_with) replaces them.
//!
//! The handler finds in the request extensions the request's [`LockOwner`](crate::LockOwner)
//! (`web::ReqData<LockOwner>`: acquire through it to re-enter the request's locks; nested lock
//! middlewares reuse it), a [`LockInfo`](crate::LockInfo) for the first lock (`web::ReqData<LockInfo>`) and
//! [`HeldLocks`](crate::HeldLocks), every lock held for the request so far.
//!
//! **Workers.** `HttpServer::new` calls its factory once per worker thread. Build the manager once,
//! before the server, and clone it into the factory; build the middleware there too and clone it in
//! when you use [`max_waiters`](LockMiddleware::max_waiters), so that the limit counts the waiters of
//! every worker together rather than of each worker apart.
//!
//! **Disconnects.** When actix-web drops a request's service future, a lock the request waits for
//! is abandoned and a lock it holds is released in the background. actix-web drops it when the
//! connection fails (a reset, a write error); a client that only closes its side of the connection
//! (a FIN) is, by default, still answered, unless the server is built with
//! `HttpServer::h1_allow_half_closed(false)`.

mod body;
mod options;
mod service;
mod view;

use std::sync::Arc;

use actix_web::body::MessageBody;
use actix_web::dev::{Service, ServiceRequest, ServiceResponse, Transform};
use actix_web::http::StatusCode;
use actix_web::HttpResponse;

pub use body::LockBody;
pub use service::LockMiddlewareService;

use crate::key::KeyExtractor;
use crate::manager::LockManager;
use crate::request::{Policy, Rejection, UnlockedCounter};

/// The policy of a middleware: its options, and its custom rejection response as an actix-web
/// response.
type MiddlewarePolicy = Policy<HttpResponse>;

/// actix-web middleware that runs each request under the locks that its key extractor derives
/// from it: see the [module docs](self).
///
/// Defaults, as for [`LockLayer`](crate::LockLayer): fair (FIFO) locks kept by the manager's
/// watchdog, a wait of at most [`DEFAULT_WAIT_TIMEOUT`](crate::request::DEFAULT_WAIT_TIMEOUT)
/// (10 s), no limit on waiters, locks released when the response is ready, the handler left running
/// if its lease is lost, `Retry-After: 1`. Its builder methods set the
/// [`RequestOptions`](crate::RequestOptions) of the middleware one at a time, as they do for the
/// layer; [`request_options`](Self::request_options) sets them all.
///
/// ```
/// use std::time::Duration;
/// use tower_lock::actix::LockMiddleware;
/// use tower_lock::{key, LockManager, LockOptions, OnLeaseLost};
///
/// let locks = LockMiddleware::new(LockManager::memory(), key::pattern("/accounts/{id}"))
///     .options(LockOptions::fair().wait_timeout(Duration::from_secs(5)))
///     .max_waiters(100)
///     .on_lease_lost(OnLeaseLost::Abort);
/// // App::new().wrap(locks.clone()) in the HttpServer factory
/// ```
pub struct LockMiddleware<K> {
    manager: LockManager,
    extractor: Arc<K>,
    policy: Arc<MiddlewarePolicy>,
}

impl<K> Clone for LockMiddleware<K> {
    fn clone(&self) -> Self {
        LockMiddleware {
            manager: self.manager.clone(),
            extractor: self.extractor.clone(),
            policy: self.policy.clone(),
        }
    }
}

impl<K> std::fmt::Debug for LockMiddleware<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LockMiddleware")
            .field("policy", &self.policy)
            .finish_non_exhaustive()
    }
}

impl<K: KeyExtractor> LockMiddleware<K> {
    /// Lock what `extractor` names in each request, through `manager` (one per process, shared by
    /// every middleware and every worker: nested middlewares re-enter locks through the request's
    /// one owner).
    pub fn new(manager: LockManager, extractor: K) -> Self {
        LockMiddleware {
            manager,
            extractor: Arc::new(extractor),
            policy: Arc::new(MiddlewarePolicy::default()),
        }
    }

    /// The number of requests this middleware let through without their locks because an
    /// optional extractor (`key::pattern(..).optional()`, ...) did not match them.
    ///
    /// Every clone of the middleware counts into the same counter, so keep this before handing
    /// the middleware to the router. Each such request is also logged at WARN (once a minute per
    /// route) and counted in `tower_lock_unmatched_total` (feature `metrics`).
    pub fn unlocked_counter(&self) -> UnlockedCounter {
        self.policy.unlocked.counter()
    }

    /// Answer rejected requests with `reject`'s response instead of the default one (which
    /// [`rejection_response`] still builds, to start from).
    ///
    /// ```
    /// use actix_web::http::StatusCode;
    /// use tower_lock::actix::{rejection_response, LockMiddleware};
    /// use tower_lock::{key, LockManager, RejectReason};
    ///
    /// let locks = LockMiddleware::new(LockManager::memory(), key::path()).reject_with(|rejection| {
    ///     let mut response = rejection_response(rejection);
    ///     if rejection.reason() == RejectReason::Busy {
    ///         *response.status_mut() = StatusCode::LOCKED; // 423 instead of 409
    ///     }
    ///     response
    /// });
    /// ```
    pub fn reject_with<F>(mut self, reject: F) -> Self
    where
        F: Fn(&Rejection) -> HttpResponse + Send + Sync + 'static,
    {
        Arc::make_mut(&mut self.policy).reject_with(Arc::new(reject));
        self
    }
}

impl<S, B, K> Transform<S, ServiceRequest> for LockMiddleware<K>
where
    S: Service<ServiceRequest, Response = ServiceResponse<B>> + 'static,
    S::Error: From<actix_web::Error>,
    B: MessageBody + 'static,
    K: KeyExtractor,
{
    type Response = ServiceResponse<LockBody<B>>;
    type Error = S::Error;
    type Transform = LockMiddlewareService<S, K>;
    type InitError = ();
    type Future = std::future::Ready<Result<Self::Transform, Self::InitError>>;

    fn new_transform(&self, service: S) -> Self::Future {
        std::future::ready(Ok(LockMiddlewareService::new(
            service,
            self.manager.clone(),
            self.extractor.clone(),
            self.policy.clone(),
        )))
    }
}

/// The response the middleware sends for `rejection` unless told otherwise: the same as the tower
/// layer's ([`Rejection::default_response`]), as an actix-web response — the reason's status, a
/// `Retry-After` in whole seconds (rounded up) when the rejection invites a retry, and a one-line
/// plain-text body naming the lock.
pub fn rejection_response(rejection: &Rejection) -> HttpResponse {
    let response = rejection.default_response();
    let status = StatusCode::from_u16(response.status().as_u16())
        .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut builder = HttpResponse::build(status);
    for (name, value) in response.headers() {
        builder.append_header((name.as_str(), value.as_bytes()));
    }
    builder.body(response.into_body())
}
