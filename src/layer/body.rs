//! `LockBody`: the response body of a locked service. It is the handler's body, which may keep the
//! request's locks until it ends, or the text of a rejection.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use pin_project::pin_project;

use crate::error::BoxError;
use crate::request::BodyGuards;

/// The response body of a [`LockService`](super::LockService): the inner service's body, or the
/// body of a rejection the layer sent itself.
///
/// With [`LockLayer::hold_until_body_end`](super::LockLayer::hold_until_body_end), the request's
/// locks are released when the body ends, fails or is dropped, rather than when the response head
/// is ready.
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
        data: Option<Bytes>,
    },
}

impl<B> LockBody<B> {
    /// The inner service's body, which keeps `guards` until it ends.
    pub(crate) fn inner(body: B, guards: BodyGuards) -> Self {
        LockBody {
            kind: Kind::Inner { body, guards },
        }
    }

    /// The body of a rejection.
    pub(crate) fn rejection(data: Bytes) -> Self {
        LockBody {
            kind: Kind::Rejection {
                data: (!data.is_empty()).then_some(data),
            },
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
            Kind::Rejection { data } => {
                f.debug_struct("LockBody").field("rejection", data).finish()
            }
        }
    }
}

impl<B> Body for LockBody<B>
where
    B: Body<Data = Bytes>,
    B::Error: Into<BoxError>,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        match self.project().kind.project() {
            KindProj::Rejection { data } => Poll::Ready(data.take().map(|d| Ok(Frame::data(d)))),
            KindProj::Inner { body, guards } => {
                guards.poll_next(cx, |cx| body.poll_frame(cx).map_err(Into::into))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.kind {
            Kind::Inner { body, .. } => body.is_end_stream(),
            Kind::Rejection { data } => data.is_none(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.kind {
            Kind::Inner { body, .. } => body.size_hint(),
            Kind::Rejection { data } => {
                SizeHint::with_exact(data.as_ref().map_or(0, |d| d.len() as u64))
            }
        }
    }
}
