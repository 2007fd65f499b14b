//! `LockMiddlewareService`: derives the request's lock names synchronously in `call` and returns a
//! future that acquires them, calls the wrapped service, and holds the locks until its response
//! (or, when asked, its body) is done, all through the request core.
//!
//! Dropping the future (actix-web does when the connection fails) at any point is safe: a pending
//! acquisition is abandoned by the manager, held locks are released in the background.

use std::rc::Rc;
use std::sync::Arc;
use std::task::{Context, Poll};

use actix_web::body::MessageBody;
use actix_web::dev::{Service, ServiceRequest, ServiceResponse};
use actix_web::error::InternalError;
use actix_web::HttpMessage;
use futures_util::future::LocalBoxFuture;

use super::body::LockBody;
use super::{rejection_response, MiddlewarePolicy};
use crate::error::LockError;
use crate::key::KeyExtractor;
use crate::manager::LockManager;
use crate::request::{owner, publish, BodyGuards, LockedCall, Rejection};

/// The service a [`LockMiddleware`](super::LockMiddleware) wraps around a service: every request
/// runs under the locks its extractor names.
///
/// Readiness is the wrapped service's. The wrapped service is called only once the request's
/// locks are held.
pub struct LockMiddlewareService<S, K> {
    service: Rc<S>,
    manager: LockManager,
    extractor: Arc<K>,
    policy: Arc<MiddlewarePolicy>,
}

impl<S, K> LockMiddlewareService<S, K> {
    pub(super) fn new(
        service: S,
        manager: LockManager,
        extractor: Arc<K>,
        policy: Arc<MiddlewarePolicy>,
    ) -> Self {
        LockMiddlewareService {
            service: Rc::new(service),
            manager,
            extractor,
            policy,
        }
    }
}

impl<S, K> std::fmt::Debug for LockMiddlewareService<S, K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LockMiddlewareService")
            .field("policy", &self.policy)
            .finish_non_exhaustive()
    }
}

impl<S, B, K> Service<ServiceRequest> for LockMiddlewareService<S, K>
where
    S: Service<ServiceRequest, Response = ServiceResponse<B>> + 'static,
    S::Error: From<actix_web::Error>,
    B: MessageBody + 'static,
    K: KeyExtractor,
{
    type Response = ServiceResponse<LockBody<B>>;
    type Error = S::Error;
    type Future = LocalBoxFuture<'static, Result<Self::Response, Self::Error>>;

    fn poll_ready(&self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.service.poll_ready(cx)
    }

    fn call(&self, req: ServiceRequest) -> Self::Future {
        let policy = self.policy.clone();
        let keys = match self.extractor.extract(&req) {
            Ok(keys) => keys,
            Err(err) => {
                let rejection = Rejection::from_error(LockError::InvalidKey(err));
                let response = reject(&policy, req.into_parts().0, rejection);
                return Box::pin(std::future::ready(Ok(response)));
            }
        };
        let service = self.service.clone();
        policy
            .unlocked
            .note(&keys, req.method().as_str(), req.path());
        if keys.is_empty() {
            return Box::pin(async move {
                let response = service.call(req).await?;
                Ok(response.map_body(|_, body| LockBody::inner(body, BodyGuards::default())))
            });
        }
        let owner = owner(&self.manager, &mut *req.extensions_mut());
        Box::pin(async move {
            let options = &policy.options;
            let route = req.match_pattern();
            let route = route.as_deref().unwrap_or(req.path());
            let owner = options.owner_for(owner, req.method().as_str(), route);
            let options_of_method = options.clone().for_method(req.method().as_str());
            let acquired = options_of_method.acquire(owner, keys.into_sorted(), None);
            let guards = match acquired.await {
                Ok(guards) => guards,
                Err(rejection) => return Ok(reject(&policy, req.into_parts().0, rejection)),
            };
            publish(&guards, &mut *req.extensions_mut());
            match LockedCall::new(service.call(req), Some(guards), options).await {
                Ok((response, guards)) => {
                    Ok(response?.map_body(|_, body| LockBody::inner(body, guards)))
                }
                // The handler was dropped for a lost lease (the abort policy). The request went
                // to the service (the router needs it alone), so the answer goes out as an error
                // that renders as the rejection.
                Err(rejection) => Err(abort(&policy, rejection).into()),
            }
        })
    }
}

/// The answer to a request whose handler a lost lease dropped, as an actix-web error.
fn abort(policy: &MiddlewarePolicy, rejection: Rejection) -> actix_web::Error {
    let response = policy.respond(rejection, false, rejection_response);
    InternalError::from_response("the lock's lease was lost", response).into()
}

fn reject<B>(
    policy: &MiddlewarePolicy,
    request: actix_web::HttpRequest,
    rejection: Rejection,
) -> ServiceResponse<LockBody<B>> {
    let response = policy.respond(rejection, false, rejection_response);
    ServiceResponse::new(request, response).map_body(|_, body| LockBody::rejection(body))
}
