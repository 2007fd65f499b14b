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
use super::LayerPolicy;
use futures_util::future::BoxFuture;

use crate::request::{publish, LockedCall, Rejection, RequestGuards};

/// The future of a [`LockService`](super::LockService) call.
#[pin_project]
pub struct ResponseFuture<S, ReqBody>
where
    S: Service<Request<ReqBody>>,
{
    #[pin]
    state: State<S::Future>,
    inner: Option<S>,
    req: Option<Request<ReqBody>>,
    policy: Arc<LayerPolicy>,
    grpc: bool,
}

#[pin_project(project = StateProj)]
enum State<F> {
    /// Acquiring the request's locks.
    Acquiring { acquire: Acquire },
    /// Waiting for the inner service to be ready, the locks held: no capacity of the inner service
    /// is reserved while the request waits for a lock.
    Readying { guards: Option<RequestGuards> },
    /// The inner service runs while the locks are held.
    Calling {
        #[pin]
        call: LockedCall<F>,
    },
    /// The response was given; the handler and the locks are gone.
    Done,
}

/// Where the request's locks come from.
pub(crate) enum Acquire {
    /// The request needs no lock.
    Nothing,
    /// The request was rejected before any acquisition (no usable lock name).
    Rejected(Option<Rejection>),
    /// The acquisition of the request's locks.
    Locks(BoxFuture<'static, Result<RequestGuards, Rejection>>),
}

impl Acquire {
    fn poll(&mut self, cx: &mut Context<'_>) -> Poll<Result<Option<RequestGuards>, Rejection>> {
        match self {
            Acquire::Nothing => Poll::Ready(Ok(None)),
            Acquire::Rejected(rejection) => match rejection.take() {
                Some(rejection) => Poll::Ready(Err(rejection)),
                None => panic!("ResponseFuture polled after completion"),
            },
            Acquire::Locks(acquire) => acquire.as_mut().poll(cx).map_ok(Some),
        }
    }
}

impl<S, ReqBody> ResponseFuture<S, ReqBody>
where
    S: Service<Request<ReqBody>>,
{
    /// Answer with `rejection`, without calling the inner service.
    pub(crate) fn rejected(rejection: Rejection, policy: Arc<LayerPolicy>, grpc: bool) -> Self {
        ResponseFuture {
            state: State::Acquiring {
                acquire: Acquire::Rejected(Some(rejection)),
            },
            inner: None,
            req: None,
            policy,
            grpc,
        }
    }

    /// Call `inner` with `req` once `acquire` is done.
    pub(crate) fn new(
        acquire: Acquire,
        inner: S,
        req: Request<ReqBody>,
        policy: Arc<LayerPolicy>,
        grpc: bool,
    ) -> Self {
        ResponseFuture {
            state: State::Acquiring { acquire },
            inner: Some(inner),
            req: Some(req),
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
                StateProj::Acquiring { acquire } => match ready!(acquire.poll(cx)) {
                    Ok(guards) => {
                        if let (Some(guards), Some(req)) = (&guards, this.req.as_mut()) {
                            publish(guards, req.extensions_mut());
                        }
                        this.state.set(State::Readying { guards });
                    }
                    Err(rejection) => {
                        this.state.set(State::Done);
                        return Poll::Ready(Ok(reject(this.policy, rejection, *this.grpc)));
                    }
                },
                StateProj::Readying { guards } => {
                    let Some(inner) = this.inner.as_mut() else {
                        panic!("ResponseFuture polled after completion");
                    };
                    if let Err(err) = ready!(inner.poll_ready(cx)) {
                        this.state.set(State::Done);
                        return Poll::Ready(Err(err));
                    }
                    let (Some(mut inner), Some(req)) = (this.inner.take(), this.req.take()) else {
                        panic!("ResponseFuture polled after completion");
                    };
                    // The service clone goes once called, as in tower's `oneshot`.
                    let call =
                        LockedCall::new(inner.call(req), guards.take(), &this.policy.options);
                    this.state.set(State::Calling { call });
                }
                StateProj::Calling { call } => {
                    let output = ready!(call.poll(cx));
                    // Drop the handler (on a lost lease, before answering) and what is left of
                    // the locks.
                    this.state.set(State::Done);
                    return Poll::Ready(match output {
                        Ok((Ok(response), guards)) => {
                            Ok(response.map(|body| LockBody::inner(body, guards)))
                        }
                        Ok((Err(err), _)) => Err(err),
                        Err(rejection) => Ok(reject(this.policy, rejection, *this.grpc)),
                    });
                }
                StateProj::Done => panic!("ResponseFuture polled after completion"),
            }
        }
    }
}

fn reject<B>(policy: &LayerPolicy, rejection: Rejection, grpc: bool) -> Response<LockBody<B>> {
    policy
        .respond(rejection, grpc, Rejection::default_response)
        .map(LockBody::rejection)
}
