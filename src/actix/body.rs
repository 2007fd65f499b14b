//! `LockBody`: the response body of the actix-web middleware. It is the handler's body, which may
//! keep the request's locks until it ends, or the body of a rejection.

use std::error::Error as StdError;
use std::pin::Pin;
use std::task::{Context, Poll};

use actix_web::body::{BodySize, BoxBody, MessageBody};
use bytes::Bytes;
use pin_project::pin_project;

use crate::request::BodyGuards;

/// The response body of a [`LockMiddleware`](super::LockMiddleware): the wrapped service's body,
/// or the body of a rejection the middleware sent itself.
///
/// With [`LockMiddleware::hold_until_body_end`](super::LockMiddleware::hold_until_body_end), the
/// request's locks are released when the body ends, fails or is dropped, rather than when the
/// response is ready; under [`OnLeaseLost::Abort`](crate::OnLeaseLost::Abort) a lease lost while
/// the body streams ends it with a
/// [`LeaseLostError`](crate::request::LeaseLostError).
#[pin_project]
pub struct LockBody<B> {
    #[pin]
    kind: Kind<B>,
}

#[pin_project(project = KindProj)]
enum Kind<B> {
    Inner {
        #[pin]
        body: B,
        guards: BodyGuards,
    },
    Rejection {
        #[pin]
        body: BoxBody,
    },
}

impl<B> LockBody<B> {
    /// The wrapped service's body, which keeps `guards` until it ends.
    pub(crate) fn inner(body: B, guards: BodyGuards) -> Self {
        LockBody {
            kind: Kind::Inner { body, guards },
        }
    }

    /// The body of a rejection.
    pub(crate) fn rejection(body: BoxBody) -> Self {
        LockBody {
            kind: Kind::Rejection { body },
        }
    }
}

impl<B> std::fmt::Debug for LockBody<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.kind {
            Kind::Inner { guards, .. } => f
                .debug_struct("LockBody")
                .field("holds_locks", &guards.is_holding())
                .finish(),
            Kind::Rejection { .. } => f
                .debug_struct("LockBody")
                .field("rejection", &true)
                .finish(),
        }
    }
}

impl<B> MessageBody for LockBody<B>
where
    B: MessageBody,
{
    type Error = Box<dyn StdError>;

    fn size(&self) -> BodySize {
        match &self.kind {
            Kind::Inner { body, .. } => body.size(),
            Kind::Rejection { body } => body.size(),
        }
    }

    fn poll_next(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Bytes, Self::Error>>> {
        match self.project().kind.project() {
            KindProj::Rejection { body } => body.poll_next(cx),
            KindProj::Inner { body, guards } => {
                guards.poll_next(cx, |cx| body.poll_next(cx).map_err(Into::into))
            }
        }
    }

    fn try_into_bytes(self) -> Result<Bytes, Self> {
        match self.kind {
            // A held lock must last until the body has been sent: stream it.
            Kind::Inner { body, guards } if !guards.is_holding() => body
                .try_into_bytes()
                .map_err(|body| LockBody::inner(body, guards)),
            Kind::Rejection { body } => body.try_into_bytes().map_err(LockBody::rejection),
            kind @ Kind::Inner { .. } => Err(LockBody { kind }),
        }
    }
}
