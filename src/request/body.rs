//! What a response body keeps of its request's locks: the guards, released when the body ends,
//! fails or is dropped, and (under the abort policy) the lost signal that ends the body early.
//! Both web stacks' bodies poll their frames through [`BodyGuards::poll_next`].

use std::task::{Context, Poll};

use super::guards::RequestGuards;
use futures_util::future::BoxFuture;

/// The error that ends a body whose lease was lost under [`OnLeaseLost::Abort`](crate::OnLeaseLost).
///
/// The client sees a body cut short rather than a complete one that was written without the lock.
#[derive(Debug, thiserror::Error)]
#[error("the lock was lost while the response body was being sent")]
pub struct LeaseLostError;

/// The locks a response body keeps until it ends (none unless the layer holds them to the body's
/// end), and the signal that ends the body when one of their leases is lost.
#[derive(Default)]
pub(crate) struct BodyGuards {
    guards: Option<RequestGuards>,
    /// Set when a lost lease must end the body (abort policy).
    lost: Option<BoxFuture<'static, ()>>,
}

impl BodyGuards {
    /// Keep `guards` until the body ends; `lost` (if any) ends the body when it resolves.
    pub(crate) fn new(guards: RequestGuards, lost: Option<BoxFuture<'static, ()>>) -> Self {
        BodyGuards {
            guards: Some(guards),
            lost,
        }
    }

    /// True when the body keeps locks (or a lost signal): it must then be streamed, not taken
    /// whole.
    pub(crate) fn is_holding(&self) -> bool {
        self.guards.is_some() || self.lost.is_some()
    }

    /// Poll the body's next item with `next`, releasing the locks when the body ends or fails, and
    /// ending it with [`LeaseLostError`] first if a lease is lost.
    pub(crate) fn poll_next<T, E>(
        &mut self,
        cx: &mut Context<'_>,
        next: impl FnOnce(&mut Context<'_>) -> Poll<Option<Result<T, E>>>,
    ) -> Poll<Option<Result<T, E>>>
    where
        E: From<LeaseLostError>,
    {
        if let Some(signal) = self.lost.as_mut() {
            if signal.as_mut().poll(cx).is_ready() {
                self.release();
                return Poll::Ready(Some(Err(E::from(LeaseLostError))));
            }
        }
        let item = std::task::ready!(next(cx));
        if !matches!(item, Some(Ok(_))) {
            self.release();
        }
        Poll::Ready(item)
    }

    fn release(&mut self) {
        self.lost = None;
        self.guards = None;
    }
}

impl std::fmt::Debug for BodyGuards {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BodyGuards")
            .field("holds_locks", &self.guards.is_some())
            .finish()
    }
}
