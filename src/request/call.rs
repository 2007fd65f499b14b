//! The handler's call, run while the request's locks are held: it ends with the handler's output
//! and what the response body keeps of the locks, or with a rejection when a lease is lost under
//! the abort policy.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use pin_project::pin_project;

use super::body::BodyGuards;
use super::guards::RequestGuards;
use super::options::{OnLeaseLost, RequestOptions};
use super::reject::{RejectReason, Rejection};
use futures_util::future::BoxFuture;

/// A handler's future running under the request's locks.
///
/// Dropping it drops the handler first, then releases the locks.
#[pin_project]
pub(crate) struct LockedCall<F> {
    #[pin]
    handler: F,
    guards: Option<RequestGuards>,
    /// Set under the abort policy: the handler is dropped when it resolves.
    lost: Option<BoxFuture<'static, ()>>,
    hold_body: bool,
}

impl<F> LockedCall<F> {
    /// Run `handler` while `guards` are held, as `options` say (abort on a lost lease or not;
    /// keep the locks until the body ends or not).
    pub(crate) fn new(handler: F, guards: Option<RequestGuards>, options: &RequestOptions) -> Self {
        let lost = match options.on_lease_lost {
            OnLeaseLost::Abort => guards.as_ref().map(RequestGuards::lost),
            OnLeaseLost::Continue => None,
        };
        LockedCall {
            handler,
            guards,
            lost,
            hold_body: options.hold_body,
        }
    }
}

impl<F: Future> Future for LockedCall<F> {
    type Output = Result<(F::Output, BodyGuards), Rejection>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        if let Poll::Ready(output) = this.handler.poll(cx) {
            let (guards, lost) = (this.guards.take(), this.lost.take());
            let body = match guards {
                Some(guards) if *this.hold_body => BodyGuards::new(guards, lost),
                _ => BodyGuards::default(),
            };
            return Poll::Ready(Ok((output, body)));
        }
        let lease_lost = this
            .lost
            .as_mut()
            .is_some_and(|signal| signal.as_mut().poll(cx).is_ready());
        if !lease_lost {
            return Poll::Pending;
        }
        // The lease was lost and the layer aborts: answer; dropping this drops the handler.
        let key = this.guards.as_ref().and_then(RequestGuards::first_key);
        Poll::Ready(Err(Rejection::new(RejectReason::LeaseLost, key, None)))
    }
}
