//! The request's locks as axum extractors, and rejections as axum responses.

use std::convert::Infallible;

use ::axum::extract::{FromRequestParts, OptionalFromRequestParts};
use ::axum::response::{IntoResponse, Response};
use http::request::Parts;
use http::StatusCode;

use crate::manager::{LockInfo, LockOwner};
use crate::request::Rejection;

/// The rejection of a [`LockInfo`] or [`LockOwner`] extractor in a handler for which no lock layer
/// took a lock: 500 Internal Server Error.
///
/// A handler that needs its lock but runs without one is a wiring mistake (no layer, a layer
/// whose extractor did not match, or the extractor filtered the method out), so it answers 500
/// rather than running unlocked. Take an `Option<LockInfo>` where running unlocked is fine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the handler needs its {what}, but no lock layer took a lock for this request")]
pub struct NotLocked {
    what: &'static str,
}

impl IntoResponse for NotLocked {
    fn into_response(self) -> Response {
        (StatusCode::INTERNAL_SERVER_ERROR, self.to_string()).into_response()
    }
}

/// The lock a layer took for the request (the innermost layer's first lock).
impl<S: Send + Sync> FromRequestParts<S> for LockInfo {
    type Rejection = NotLocked;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, NotLocked> {
        parts
            .extensions
            .get::<LockInfo>()
            .cloned()
            .ok_or(NotLocked { what: "LockInfo" })
    }
}

/// The lock a layer took for the request, if one did.
impl<S: Send + Sync> OptionalFromRequestParts<S> for LockInfo {
    type Rejection = Infallible;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Option<Self>, Infallible> {
        Ok(parts.extensions.get::<LockInfo>().cloned())
    }
}

/// The owner the request's locks are held for: acquire through it to re-enter them.
impl<S: Send + Sync> FromRequestParts<S> for LockOwner {
    type Rejection = NotLocked;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, NotLocked> {
        parts
            .extensions
            .get::<LockOwner>()
            .cloned()
            .ok_or(NotLocked { what: "LockOwner" })
    }
}

/// The owner the request's locks are held for, if a layer took one.
impl<S: Send + Sync> OptionalFromRequestParts<S> for LockOwner {
    type Rejection = Infallible;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Option<Self>, Infallible> {
        Ok(parts.extensions.get::<LockOwner>().cloned())
    }
}

/// The rejection's default response ([`Rejection::default_response`]).
impl IntoResponse for Rejection {
    fn into_response(self) -> Response {
        self.default_response()
            .map(::axum::body::Body::from)
            .into_response()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::RejectReason;

    #[tokio::test]
    async fn rejections_and_missing_locks_are_responses() {
        let busy = Rejection::new(RejectReason::Busy, Some("accounts/42".into()), None);
        assert_eq!(busy.into_response().status(), StatusCode::CONFLICT);
        let (mut parts, ()) = http::Request::new(()).into_parts();
        let missing = <LockInfo as FromRequestParts<()>>::from_request_parts(&mut parts, &()).await;
        let response = missing.map(|_| ()).unwrap_err().into_response();
        assert_eq!(response.status(), StatusCode::INTERNAL_SERVER_ERROR);
        let optional =
            <LockOwner as OptionalFromRequestParts<()>>::from_request_parts(&mut parts, &()).await;
        assert!(matches!(optional, Ok(None)));
    }
}
