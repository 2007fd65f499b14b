//! `ResponseFuture`: acquire the request's locks, then wait for the inner service to be ready, call
//! it, and hold the locks until its response (or, when asked, its body) is done.
//!
//! Dropping the future (a client that went away) at any point is safe: a pending acquisition is
//! abandoned by the manager, held locks are released in the background.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};

use http::{Request, Response};
use pin_project::pin_project;
use tower_service::Service;

use super::body::LockBody;
use super::policy::{BoxFuture, Hold, OnLeaseLost, Policy};
use super::reject::{RejectReason, Rejection};
use super::HeldLocks;

/// The future of a [`LockService`](super::LockService) call.
#[pin_project]
pub struct ResponseFuture<S, ReqBody>
where
    S: Service<Request<ReqBody>>,
{
    #[pin]
    state: State<S, ReqBody, S::Future>,
    policy: Arc<Policy>,
    grpc: bool,
}

#[pin_project(project = StateProj)]
enum State<S, ReqBody, F> {
    /// The layer answers without calling the inner service.
    Rejected {
        rejection: Option<Rejection>,
    },
    /// Acquiring the locks (if `acquire` is set), then waiting for the inner service to be ready:
    /// no capacity of the inner service is reserved while the request waits for a lock.
    Preparing {
        acquire: Option<BoxFuture<Result<Hold, Rejection>>>,
        inner: S,
        req: Option<Request<ReqBody>>,
        hold: Option<Hold>,
    },
    /// The inner service runs while the locks are held.
    Calling {
        #[pin]
        future: F,
        hold: Option<Hold>,
        lost: Option<BoxFuture<()>>,
    },
    Done,
}

impl<S, ReqBody> ResponseFuture<S, ReqBody>
where
    S: Service<Request<ReqBody>>,
{
    pub(crate) fn rejected(rejection: Rejection, policy: Arc<Policy>, grpc: bool) -> Self {
        ResponseFuture {
            state: State::Rejected {
                rejection: Some(rejection),
            },
            policy,
            grpc,
        }
    }

    /// Call `inner` with `req` once the locks `acquire` resolves to are held (at once with no
    /// `acquire`: the request needs no lock).
    pub(crate) fn new(
        acquire: Option<BoxFuture<Result<Hold, Rejection>>>,
        inner: S,
        req: Request<ReqBody>,
        policy: Arc<Policy>,
        grpc: bool,
    ) -> Self {
        ResponseFuture {
            state: State::Preparing {
                acquire,
                inner,
                req: Some(req),
                hold: None,
            },
            policy,
            grpc,
        }
    }
}

impl<S, ReqBody, ResBody> Future for ResponseFuture<S, ReqBody>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>>,
{
    type Output = Result<Response<LockBody<ResBody>>, S::Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        loop {
            match this.state.as_mut().project() {
                StateProj::Rejected { rejection } => {
                    let Some(rejection) = rejection.take() else {
                        panic!("ResponseFuture polled after completion");
                    };
                    let response = reject(this.policy, rejection, *this.grpc);
                    this.state.set(State::Done);
                    return Poll::Ready(Ok(response));
                }
                StateProj::Preparing {
                    acquire,
                    inner,
                    req,
                    hold,
                } => {
                    if let Some(acquiring) = acquire.as_mut() {
                        match ready!(acquiring.as_mut().poll(cx)) {
                            Ok(held) => {
                                if let Some(req) = req.as_mut() {
                                    publish(&held, req.extensions_mut());
                                }
                                *hold = Some(held);
                                *acquire = None;
                            }
                            Err(rejection) => {
                                let response = reject(this.policy, rejection, *this.grpc);
                                this.state.set(State::Done);
                                return Poll::Ready(Ok(response));
                            }
                        }
                    }
                    if let Err(err) = ready!(inner.poll_ready(cx)) {
                        this.state.set(State::Done);
                        return Poll::Ready(Err(err));
                    }
                    let Some(req) = req.take() else {
                        panic!("ResponseFuture polled after completion");
                    };
                    let future = inner.call(req);
                    let hold = hold.take();
                    let lost = match this.policy.on_lease_lost {
                        OnLeaseLost::Abort => hold.as_ref().map(Hold::lost),
                        OnLeaseLost::Continue => None,
                    };
                    this.state.set(State::Calling { future, hold, lost });
                }
                StateProj::Calling { future, hold, lost } => {
                    match future.poll(cx) {
                        Poll::Ready(Ok(response)) => {
                            let (hold, lost) = (hold.take(), lost.take());
                            let response = if this.policy.hold_body {
                                response.map(|body| LockBody::inner(body, hold, lost))
                            } else {
                                drop(hold);
                                response.map(|body| LockBody::inner(body, None, None))
                            };
                            this.state.set(State::Done);
                            return Poll::Ready(Ok(response));
                        }
                        Poll::Ready(Err(err)) => {
                            this.state.set(State::Done);
                            return Poll::Ready(Err(err));
                        }
                        Poll::Pending => {}
                    }
                    let lease_lost = lost
                        .as_mut()
                        .is_some_and(|signal| signal.as_mut().poll(cx).is_ready());
                    if !lease_lost {
                        return Poll::Pending;
                    }
                    // The lease was lost and the layer aborts: drop the handler, then answer.
                    let key = hold.as_ref().and_then(Hold::first_key);
                    this.state.set(State::Done);
                    let rejection = Rejection::new(RejectReason::LeaseLost, key, None);
                    return Poll::Ready(Ok(reject(this.policy, rejection, *this.grpc)));
                }
                StateProj::Done => panic!("ResponseFuture polled after completion"),
            }
        }
    }
}

fn reject<B>(policy: &Policy, rejection: Rejection, grpc: bool) -> Response<LockBody<B>> {
    policy.respond(rejection, grpc).map(LockBody::rejection)
}

/// Tell the handler what it holds: a [`LockInfo`](crate::LockInfo) for the first lock of this
/// layer, and every lock of every layer so far in [`HeldLocks`].
fn publish(hold: &Hold, extensions: &mut http::Extensions) {
    let mut infos = hold.infos();
    let Some(first) = infos.next() else {
        return;
    };
    let mut held = extensions.remove::<HeldLocks>().unwrap_or_default();
    held.push(first.clone());
    for info in infos {
        held.push(info);
    }
    extensions.insert(held);
    extensions.insert(first);
}
