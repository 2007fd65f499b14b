//! `LockMiddlewareService`: derives the request's lock names synchronously in `call` and returns a
//! future that acquires them (through the tower layer's policy), calls the wrapped service, and
//! holds the locks until its response (or, when asked, its body) is done.
//!
//! Dropping the future (actix-web does when the connection fails) at any point is safe: a pending
//! acquisition is abandoned by the manager, held locks are released in the background.

use std::rc::Rc;
use std::sync::Arc;
use std::task::{Context, Poll};

use actix_web::body::MessageBody;
use actix_web::dev::{Service, ServiceRequest, ServiceResponse};
use actix_web::HttpMessage;
use futures_util::future::{Either, LocalBoxFuture};

use super::body::LockBody;
use super::{publish, Rejecter};
use crate::error::LockError;
use crate::key::KeyExtractor;
use crate::layer::policy::Hold;
use crate::layer::{OnLeaseLost, RejectReason, Rejection};
use crate::manager::{LockManager, LockOwner};

/// The service a [`LockMiddleware`](super::LockMiddleware) wraps around a service: every request
/// runs under the locks its extractor names.
///
/// Readiness is the wrapped service's. The wrapped service is called only once the request's
/// locks are held.
pub struct LockMiddlewareService<S, K> {
    service: Rc<S>,
    manager: LockManager,
    extractor: Arc<K>,
    rejecter: Arc<Rejecter>,
}

impl<S, K> LockMiddlewareService<S, K> {
    pub(super) fn new(
        service: S,
        manager: LockManager,
        extractor: Arc<K>,
        rejecter: Arc<Rejecter>,
    ) -> Self {
        LockMiddlewareService {
            service: Rc::new(service),
            manager,
            extractor,
            rejecter,
        }
    }
}

impl<S, K> std::fmt::Debug for LockMiddlewareService<S, K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LockMiddlewareService")
            .field("policy", &self.rejecter.policy)
            .finish_non_exhaustive()
    }
}

impl<S, B, K> Service<ServiceRequest> for LockMiddlewareService<S, K>
where
    S: Service<ServiceRequest, Response = ServiceResponse<B>> + 'static,
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
        let rejecter = self.rejecter.clone();
        let keys = match self.extractor.extract(&req) {
            Ok(keys) => keys,
            Err(err) => {
                let rejection = Rejection::from_error(LockError::InvalidKey(err));
                let response = reject(&rejecter, req.into_parts().0, rejection);
                return Box::pin(std::future::ready(Ok(response)));
            }
        };
        let service = self.service.clone();
        if keys.is_empty() {
            return Box::pin(async move {
                let response = service.call(req).await?;
                Ok(response.map_body(|_, body| LockBody::inner(body, None, None)))
            });
        }
        // Re-enter through the request's owner, unless it belongs to another manager (a nested
        // middleware over a different backend): then this middleware's locks get an owner of
        // their own.
        let existing = req.extensions().get::<LockOwner>().cloned();
        let owner = match existing {
            Some(owner) if owner.belongs_to(&self.manager) => owner,
            Some(_) => self.manager.owner(),
            None => {
                let owner = self.manager.owner();
                req.extensions_mut().insert(owner.clone());
                owner
            }
        };
        Box::pin(async move {
            let policy = rejecter.policy.clone();
            let hold = match policy
                .clone()
                .acquire(owner, keys.into_sorted(), None)
                .await
            {
                Ok(hold) => hold,
                Err(rejection) => return Ok(reject(&rejecter, req.into_parts().0, rejection)),
            };
            publish(hold.infos(), &mut req.extensions_mut());
            let response = match policy.on_lease_lost {
                OnLeaseLost::Abort => {
                    // Kept to answer with when the handler is dropped.
                    let request = req.request().clone();
                    match call_until_lost(&*service, req, &hold).await {
                        Some(response) => response?,
                        None => {
                            let rejection =
                                Rejection::new(RejectReason::LeaseLost, hold.first_key(), None);
                            drop(hold);
                            return Ok(reject(&rejecter, request, rejection));
                        }
                    }
                }
                OnLeaseLost::Continue => service.call(req).await?,
            };
            if !policy.hold_body {
                drop(hold);
                return Ok(response.map_body(|_, body| LockBody::inner(body, None, None)));
            }
            let lost = match policy.on_lease_lost {
                OnLeaseLost::Abort => Some(hold.lost()),
                OnLeaseLost::Continue => None,
            };
            Ok(response.map_body(|_, body| LockBody::inner(body, Some(hold), lost)))
        })
    }
}

/// Call `service` with `req` unless a lease of `hold` is lost first: then the handler's future is
/// dropped (cancelled at its next `.await`) and the answer is `None`.
async fn call_until_lost<S, B>(
    service: &S,
    req: ServiceRequest,
    hold: &Hold,
) -> Option<Result<ServiceResponse<B>, S::Error>>
where
    S: Service<ServiceRequest, Response = ServiceResponse<B>>,
{
    let call = std::pin::pin!(service.call(req));
    match futures_util::future::select(call, hold.lost()).await {
        Either::Left((response, _)) => Some(response),
        Either::Right(((), _)) => None,
    }
}

fn reject<B>(
    rejecter: &Rejecter,
    request: actix_web::HttpRequest,
    rejection: Rejection,
) -> ServiceResponse<LockBody<B>> {
    ServiceResponse::new(request, rejecter.respond(rejection))
        .map_body(|_, body| LockBody::rejection(body))
}
