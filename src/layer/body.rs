//! `LockBody`: the response body of a locked service. It is the handler's body, which may keep the
//! request's locks until it ends, or the text of a rejection.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use pin_project::pin_project;

use super::policy::{BoxFuture, Hold};
use crate::error::BoxError;

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
        hold: Option<Hold>,
        /// Set when a lost lease must end the body (abort policy).
        lost: Option<BoxFuture<()>>,
    },
    Rejection {
        data: Option<Bytes>,
    },
}

impl<B> LockBody<B> {
    /// The inner service's body; `hold` (if any) is released when it ends.
    pub(crate) fn inner(body: B, hold: Option<Hold>, lost: Option<BoxFuture<()>>) -> Self {
        LockBody {
            kind: Kind::Inner { body, hold, lost },
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
            Kind::Inner { hold, .. } => f
                .debug_struct("LockBody")
                .field("holds_locks", &hold.is_some())
                .finish(),
            Kind::Rejection { data } => {
                f.debug_struct("LockBody").field("rejection", data).finish()
            }
        }
    }
}

/// The error that ends a body whose lease was lost under [`OnLeaseLost::Abort`](super::OnLeaseLost).
#[derive(Debug, thiserror::Error)]
#[error("the lock was lost while the response body was being sent")]
pub struct LeaseLostError;

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
            KindProj::Inner { body, hold, lost } => {
                if let Some(signal) = lost.as_mut() {
                    if signal.as_mut().poll(cx).is_ready() {
                        *lost = None;
                        *hold = None;
                        return Poll::Ready(Some(Err(Box::new(LeaseLostError))));
                    }
                }
                let frame = std::task::ready!(body.poll_frame(cx));
                match frame {
                    Some(Ok(frame)) => Poll::Ready(Some(Ok(frame))),
                    Some(Err(err)) => {
                        *hold = None;
                        *lost = None;
                        Poll::Ready(Some(Err(err.into())))
                    }
                    None => {
                        *hold = None;
                        *lost = None;
                        Poll::Ready(None)
                    }
                }
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
