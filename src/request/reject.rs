//! Rejections: why a lock layer or middleware answered a request itself, and the HTTP or gRPC
//! response it sends.

use std::fmt;
use std::time::Duration;

use bytes::Bytes;
use http::header::{HeaderValue, CONTENT_TYPE, RETRY_AFTER};
use http::StatusCode;

use super::grpc::trailers_only;
use crate::error::{KeyError, LockError};

/// Why a request was answered by the layer instead of its handler.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RejectReason {
    /// No usable lock name could be derived from the request (400; gRPC `INVALID_ARGUMENT`).
    InvalidKey,
    /// The lock stayed busy for the whole wait timeout, or the gRPC deadline (503 with `Retry-After`;
    /// gRPC `UNAVAILABLE`).
    Timeout,
    /// The lock was busy and the layer is in no-wait mode (409 with `Retry-After`; gRPC `ABORTED`).
    Busy,
    /// Too many requests of this process already wait for this lock (503 with `Retry-After`; gRPC
    /// `UNAVAILABLE`).
    TooManyWaiters,
    /// The lock backend could not be reached (503 with `Retry-After`; gRPC `UNAVAILABLE`).
    Unavailable,
    /// The lease was lost while the handler ran and the layer aborts on lease loss (503; gRPC
    /// `ABORTED`).
    LeaseLost,
    /// The request's options conflict with how the lock is held, such as a semaphore of another
    /// size (409 with what to change in the body; gRPC `FAILED_PRECONDITION`). Retrying the same
    /// request does not help: its configuration must change, so no `Retry-After` is sent.
    Conflict,
    /// The lock could not be taken for another reason (500; gRPC `INTERNAL`).
    Failed,
}

impl RejectReason {
    /// A short, stable name (`"timeout"`, `"busy"`, ...), used as the metrics label.
    pub fn as_str(&self) -> &'static str {
        match self {
            RejectReason::InvalidKey => "invalid_key",
            RejectReason::Timeout => "timeout",
            RejectReason::Busy => "busy",
            RejectReason::TooManyWaiters => "too_many_waiters",
            RejectReason::Unavailable => "unavailable",
            RejectReason::LeaseLost => "lease_lost",
            RejectReason::Conflict => "conflict",
            RejectReason::Failed => "failed",
        }
    }

    /// The HTTP status of the default response.
    pub fn status(&self) -> StatusCode {
        match self {
            RejectReason::InvalidKey => StatusCode::BAD_REQUEST,
            RejectReason::Busy | RejectReason::Conflict => StatusCode::CONFLICT,
            RejectReason::Timeout
            | RejectReason::TooManyWaiters
            | RejectReason::Unavailable
            | RejectReason::LeaseLost => StatusCode::SERVICE_UNAVAILABLE,
            RejectReason::Failed => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// The gRPC status code of the default gRPC response (`3` INVALID_ARGUMENT, `14` UNAVAILABLE,
    /// `10` ABORTED, `9` FAILED_PRECONDITION, `13` INTERNAL).
    pub fn grpc_code(&self) -> u8 {
        match self {
            RejectReason::InvalidKey => 3,
            RejectReason::Timeout | RejectReason::TooManyWaiters | RejectReason::Unavailable => 14,
            RejectReason::Busy | RejectReason::LeaseLost => 10,
            RejectReason::Conflict => 9,
            RejectReason::Failed => 13,
        }
    }

    fn message(&self) -> &'static str {
        match self {
            RejectReason::InvalidKey => "cannot derive a lock key from the request",
            RejectReason::Timeout => "timed out waiting for a lock",
            RejectReason::Busy => "the resource is locked by another request",
            RejectReason::TooManyWaiters => "too many requests are waiting for this lock",
            RejectReason::Unavailable => "the lock service is unavailable",
            RejectReason::LeaseLost => "the lock was lost while the request ran",
            RejectReason::Conflict => {
                "the lock is held in a way this request's options cannot share"
            }
            RejectReason::Failed => "the lock could not be taken",
        }
    }
}

impl fmt::Display for RejectReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.message())
    }
}

/// A request the layer answered itself: the reason, the lock concerned, the cause, and whether the
/// request was gRPC. A custom rejection handler ([`LockLayer::reject_with`](crate::LockLayer::reject_with))
/// receives one and may start from [`Rejection::default_response`].
#[derive(Debug)]
pub struct Rejection {
    reason: RejectReason,
    key: Option<String>,
    error: Option<LockError>,
    retry_after: Option<Duration>,
    grpc: bool,
}

impl Rejection {
    pub(crate) fn new(reason: RejectReason, key: Option<String>, error: Option<LockError>) -> Self {
        Rejection {
            reason,
            key,
            error,
            retry_after: None,
            grpc: false,
        }
    }

    /// Reject for `error` (the key is taken from it).
    pub(crate) fn from_error(error: LockError) -> Self {
        let reason = match &error {
            LockError::InvalidKey(_) => RejectReason::InvalidKey,
            LockError::Timeout { .. } => RejectReason::Timeout,
            LockError::Unavailable { .. } | LockError::Closed => RejectReason::Unavailable,
            LockError::Unsupported { .. } => RejectReason::Conflict,
            _ => RejectReason::Failed,
        };
        let key = error.key().map(str::to_owned);
        Rejection::new(reason, key, Some(error))
    }

    pub(crate) fn set_context(&mut self, retry_after: Duration, grpc: bool) {
        self.grpc = grpc;
        self.retry_after = match self.reason {
            RejectReason::InvalidKey | RejectReason::Conflict | RejectReason::Failed => None,
            _ => Some(retry_after),
        };
    }

    /// Why the request was rejected.
    pub fn reason(&self) -> RejectReason {
        self.reason
    }

    /// The lock name concerned, when one was derived.
    pub fn key(&self) -> Option<&str> {
        self.key.as_deref()
    }

    /// The lock error behind the rejection, if any.
    pub fn error(&self) -> Option<&LockError> {
        self.error.as_ref()
    }

    /// The `Retry-After` the default response carries (none for 400, a conflict of options and
    /// 500).
    pub fn retry_after(&self) -> Option<Duration> {
        self.retry_after
    }

    /// True when the request was gRPC (its `content-type` starts with `application/grpc`).
    pub fn is_grpc(&self) -> bool {
        self.grpc
    }

    /// The response the layer sends unless told otherwise. HTTP: the reason's status, a
    /// `Retry-After` in whole seconds (rounded up), and a one-line plain-text body naming the lock,
    /// or for a 400 why no key could be derived (`... path /x does not match the lock pattern
    /// /accounts/{id}`). gRPC: a
    /// trailers-only response (HTTP 200, `grpc-status` and `grpc-message` in the headers, no body).
    pub fn default_response(&self) -> http::Response<Bytes> {
        let message = match (&self.error, &self.key) {
            // Why no key could be derived: the request's sender (or its developer) can fix it.
            (Some(LockError::InvalidKey(KeyError::Extract(why))), _) => {
                format!("{}: {why}", self.reason)
            }
            (Some(LockError::InvalidKey(err)), _) => format!("{}: {err}", self.reason),
            // What to change: the options of this route, or of the other code taking the lock.
            (Some(err @ LockError::Unsupported { .. }), _) => format!("{}: {err}", self.reason),
            (_, Some(key)) => format!("{}: {key}", self.reason),
            (_, None) => self.reason.to_string(),
        };
        let mut response = if self.grpc {
            trailers_only(self.reason.grpc_code(), &message)
        } else {
            let mut response = http::Response::new(Bytes::from(message + "\n"));
            *response.status_mut() = self.reason.status();
            response.headers_mut().insert(
                CONTENT_TYPE,
                HeaderValue::from_static("text/plain; charset=utf-8"),
            );
            response
        };
        if let Some(after) = self.retry_after {
            let seconds = (after.as_secs()).saturating_add(u64::from(after.subsec_nanos() > 0));
            response
                .headers_mut()
                .insert(RETRY_AFTER, HeaderValue::from(seconds.max(1)));
        }
        response
    }
}

impl fmt::Display for Rejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.error, &self.key) {
            (Some(error), _) => write!(f, "{}: {error}", self.reason),
            (None, Some(key)) => write!(f, "{}: {key}", self.reason),
            (None, None) => write!(f, "{}", self.reason),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn http_rejections_carry_status_and_retry_after() {
        let mut busy = Rejection::new(RejectReason::Busy, Some("accounts/42".into()), None);
        busy.set_context(Duration::from_millis(1500), false);
        let response = busy.default_response();
        assert_eq!(response.status(), StatusCode::CONFLICT);
        assert_eq!(response.headers()[RETRY_AFTER], "2");
        assert!(String::from_utf8_lossy(response.body()).contains("accounts/42"));

        let mut bad = Rejection::new(RejectReason::InvalidKey, None, None);
        bad.set_context(Duration::from_secs(1), false);
        let response = bad.default_response();
        assert_eq!(response.status(), StatusCode::BAD_REQUEST);
        assert!(response.headers().get(RETRY_AFTER).is_none());

        let why = KeyError::Extract("header x-account is missing".into());
        let mut bad = Rejection::from_error(LockError::InvalidKey(why));
        bad.set_context(Duration::from_secs(1), false);
        assert_eq!(
            bad.default_response().body(),
            "cannot derive a lock key from the request: header x-account is missing\n"
        );
    }

    #[test]
    fn options_that_conflict_with_the_lock_are_a_409_saying_what_to_change() {
        let what = "a semaphore(3) request on a semaphore of another size: every request of one \
                    lock names the same number of permits"
            .to_owned();
        let err = LockError::Unsupported {
            key: "tenants/acme".into(),
            what: what.clone(),
        };
        let mut conflict = Rejection::from_error(err);
        conflict.set_context(Duration::from_secs(1), false);
        let response = conflict.default_response();
        assert_eq!(response.status(), StatusCode::CONFLICT);
        assert!(response.headers().get(RETRY_AFTER).is_none());
        let body = String::from_utf8_lossy(response.body()).into_owned();
        assert!(
            body.contains(&what) && body.contains("tenants/acme"),
            "{body}"
        );
        assert_eq!(RejectReason::Conflict.grpc_code(), 9);
    }

    #[test]
    fn grpc_rejections_are_trailers_only() {
        let mut lost = Rejection::new(RejectReason::LeaseLost, Some("caf\u{e9} 100%".into()), None);
        lost.set_context(Duration::from_secs(1), true);
        let response = lost.default_response();
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(response.headers()["grpc-status"], "10");
        assert_eq!(response.headers()["content-type"], "application/grpc");
        #[cfg(not(feature = "tonic"))]
        assert_eq!(
            response.headers()["grpc-message"],
            "the lock was lost while the request ran: caf%C3%A9 100%25"
        );
        // tonic escapes spaces too
        #[cfg(feature = "tonic")]
        assert_eq!(
            response.headers()["grpc-message"],
            "the%20lock%20was%20lost%20while%20the%20request%20ran:%20caf%C3%A9%20100%25"
        );
        assert!(response.body().is_empty());
    }
}
