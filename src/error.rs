//! Errors: every error names the key it concerns and carries its cause.

use std::time::Duration;

/// A boxed error from a backend (a Redis I/O error, a timeout, a script failure).
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Why a lock operation failed.
///
/// `LockError` separates the cases a service must answer differently: the caller's input was bad
/// ([`LockError::InvalidKey`], an HTTP 400), the lock stayed busy for the whole wait
/// ([`LockError::Timeout`], a 503 with `Retry-After`), the backend could not be reached
/// ([`LockError::Unavailable`], a 503), or the lease had already been lost when the holder released it
/// ([`LockError::NotHeld`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LockError {
    /// The lock name is not acceptable (empty, or too long).
    #[error(transparent)]
    InvalidKey(#[from] KeyError),
    /// The lock stayed held by someone else for the whole wait timeout.
    #[error("timed out after {waited:?} waiting for lock {key:?}")]
    Timeout {
        /// The lock name, as given.
        key: String,
        /// How long the caller waited.
        waited: Duration,
    },
    /// The backend (Redis) could not be reached or did not answer in time.
    #[error("lock backend unavailable{}: {source}", for_key(key))]
    Unavailable {
        /// The lock name, as given (empty when the failure concerns no single lock, e.g. connecting
        /// at start-up).
        key: String,
        /// The cause.
        #[source]
        source: BoxError,
    },
    /// The lock was no longer held by this owner when it was released: its lease had expired or it
    /// was deleted, so the critical section may have overlapped with another holder.
    #[error("lock {key:?} was not held any more when it was released (lease lost)")]
    NotHeld {
        /// The lock name, as given.
        key: String,
    },
    /// The requested options are not supported: by this manager (fair and shared locks on a
    /// quorum), or on this lock right now (it is held or waited for in another family of modes:
    /// one lock takes one family at a time, since neither would see the other's holders).
    #[error("unsupported for lock {key:?}: {what}")]
    Unsupported {
        /// The lock name, as given.
        key: String,
        /// What is not supported.
        what: String,
    },
    /// A run-once job was refused when it was scheduled
    /// ([`LockManager::run_once`](crate::LockManager::run_once)): its schedule cannot be what its
    /// author meant (a zero period, `at_least` past `at_most`), or no Tokio runtime runs the call.
    /// Refused at once, so that a job never silently runs never, or twice a tick.
    #[error("invalid run-once job {key:?}: {reason}")]
    InvalidJob {
        /// The job's lock name, as given.
        key: String,
        /// What is wrong, and what to write instead.
        reason: String,
    },
    /// The manager could not be built (bad URL, bad namespace, ...).
    #[error("invalid lock manager configuration: {0}")]
    Config(String),
    /// The manager was shut down ([`LockManager::shutdown`](crate::LockManager::shutdown)): it
    /// takes no lock any more. A process that is stopping refuses new work instead of taking locks
    /// it could not release.
    #[error("the lock manager is shut down")]
    Closed,
}

impl LockError {
    /// The lock name this error concerns, if any.
    pub fn key(&self) -> Option<&str> {
        match self {
            LockError::InvalidKey(_) | LockError::Config(_) | LockError::Closed => None,
            LockError::Unavailable { key, .. } if key.is_empty() => None,
            LockError::Timeout { key, .. }
            | LockError::Unavailable { key, .. }
            | LockError::NotHeld { key }
            | LockError::Unsupported { key, .. }
            | LockError::InvalidJob { key, .. } => Some(key),
        }
    }

    /// True when the error says the backend is down or slow: retrying later may succeed.
    pub fn is_unavailable(&self) -> bool {
        matches!(self, LockError::Unavailable { .. })
    }

    pub(crate) fn unavailable(key: &str, source: impl Into<BoxError>) -> Self {
        LockError::Unavailable {
            key: key.to_owned(),
            source: source.into(),
        }
    }
}

/// ` for "KEY"`, or nothing when the error concerns no single lock.
fn for_key(key: &str) -> String {
    if key.is_empty() {
        String::new()
    } else {
        format!(" for {key:?}")
    }
}

/// A lock name that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum KeyError {
    /// The name is empty.
    #[error("lock name is empty")]
    Empty,
    /// A set of locks to take together has no lock name in it.
    #[error("no lock name was given")]
    NoKeys,
    /// The name is longer than the limit, `max` bytes (the `key` module's `MAX_KEY_LEN`).
    #[error("lock name is {len} bytes long; the limit is {max}")]
    TooLong {
        /// The length of the rejected name.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// A request did not yield a usable key (used by key extractors).
    #[error("cannot derive a lock key from the request: {0}")]
    Extract(String),
    /// A key extractor was built from a pattern that cannot be what its author meant (unbalanced
    /// braces, axum 0.7's `:id`, an empty pattern, a parameter named twice): refused when the
    /// extractor is built, so that it never silently locks nothing.
    #[error("invalid lock pattern {pattern:?}: {reason}")]
    Pattern {
        /// The pattern as written.
        pattern: String,
        /// What is wrong with it, and what to write instead.
        reason: String,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unavailable_names_its_key_only_when_there_is_one() {
        let start_up = LockError::unavailable("", "Connection refused");
        assert_eq!(
            start_up.to_string(),
            "lock backend unavailable: Connection refused"
        );
        assert_eq!(start_up.key(), None);
        let one = LockError::unavailable("account:42", "timed out");
        assert_eq!(
            one.to_string(),
            "lock backend unavailable for \"account:42\": timed out"
        );
    }
}
