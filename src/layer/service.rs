//! `LockService`: derives the request's lock names synchronously in `call` and returns a
//! [`ResponseFuture`] that acquires them before calling the inner service.

use std::sync::Arc;
use std::task::{Context, Poll};

use http::header::CONTENT_TYPE;
use http::{Request, Response};
use tower_service::Service;

use super::future::{Acquire, ResponseFuture};
use super::{LayerPolicy, LockBody};
use crate::error::LockError;
use crate::key::KeyExtractor;
use crate::manager::LockManager;
use crate::request::{is_grpc, owner, Rejection};

/// The service a [`LockLayer`](super::LockLayer) wraps around an inner service: every request runs
/// under the locks its extractor names.
///
/// `poll_ready` is always ready: the inner service's readiness is awaited inside the response
/// future, after the locks are held, so a request waiting for a lock never reserves capacity of the
/// inner service (a concurrency limit, a connection pool) that the holder may need.
pub struct LockService<S, K> {
    inner: S,
    manager: LockManager,
    extractor: Arc<K>,
    policy: Arc<LayerPolicy>,
}

impl<S, K> LockService<S, K> {
    pub(crate) fn new(
        inner: S,
        manager: LockManager,
        extractor: Arc<K>,
        policy: Arc<LayerPolicy>,
    ) -> Self {
        LockService {
            inner,
            manager,
            extractor,
            policy,
        }
    }

    /// The inner service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The inner service, mutably.
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.inner
    }

    /// Unwrap the inner service.
    pub fn into_inner(self) -> S {
        self.inner
    }
}

impl<S: Clone, K> Clone for LockService<S, K> {
    fn clone(&self) -> Self {
        LockService {
            inner: self.inner.clone(),
            manager: self.manager.clone(),
            extractor: self.extractor.clone(),
            policy: self.policy.clone(),
        }
    }
}

impl<S: std::fmt::Debug, K> std::fmt::Debug for LockService<S, K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LockService")
            .field("inner", &self.inner)
            .field("policy", &self.policy)
            .finish()
    }
}

impl<S, K, ReqBody, ResBody> Service<Request<ReqBody>> for LockService<S, K>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>> + Clone,
    K: KeyExtractor,
{
    type Response = Response<LockBody<ResBody>>;
    type Error = S::Error;
    type Future = ResponseFuture<S, ReqBody>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, mut req: Request<ReqBody>) -> Self::Future {
        // The clone we were (not) made ready goes into the future, which awaits its readiness.
        let clone = self.inner.clone();
        let inner = std::mem::replace(&mut self.inner, clone);
        let policy = self.policy.clone();
        let grpc = is_grpc(req.headers().get(CONTENT_TYPE).map(|v| v.as_bytes()));
        let keys = match self.extractor.extract(&req) {
            Ok(keys) => keys,
            Err(err) => {
                let rejection = Rejection::from_error(LockError::InvalidKey(err));
                return ResponseFuture::rejected(rejection, policy, grpc);
            }
        };
        policy
            .unlocked
            .note(&keys, req.method().as_str(), req.uri().path());
        if keys.is_empty() {
            return ResponseFuture::new(Acquire::Nothing, inner, req, policy, grpc);
        }
        let owner = owner(&self.manager, req.extensions_mut());
        let owner = (policy.options).owner_for(owner, req.method().as_str(), route(&req));
        let cap = grpc
            .then(|| {
                let header = req.headers().get("grpc-timeout");
                policy.options.grpc_cap(header.map(|v| v.as_bytes()))
            })
            .flatten();
        let acquire = Box::pin(
            policy
                .options
                .clone()
                .for_method(req.method().as_str())
                .acquire(owner, keys.into_sorted(), cap),
        );
        ResponseFuture::new(Acquire::Locks(acquire), inner, req, policy, grpc)
    }
}

/// The route a request matched, as the router tells it (axum's `MatchedPath`), else its path:
/// never its query string.
fn route<B>(req: &Request<B>) -> &str {
    #[cfg(feature = "axum")]
    if let Some(matched) = req.extensions().get::<axum::extract::MatchedPath>() {
        return matched.as_str();
    }
    req.uri().path()
}
