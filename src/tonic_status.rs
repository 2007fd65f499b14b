//! tonic integration (feature `tonic`): lock errors as gRPC statuses, so that a gRPC handler that
//! takes a lock itself answers with `?` as the lock layer would.

use tonic::{Code, Status};

use crate::error::LockError;

/// The gRPC status of a lock error, with the error's message.
///
/// The codes follow the lock layer's: a bad key is the caller's (`INVALID_ARGUMENT`); a wait that
/// timed out, an unreachable backend or a manager shut down may succeed elsewhere or later
/// (`UNAVAILABLE`, which clients may retry); a lease lost before the release means the work may
/// have overlapped with another holder's (`ABORTED`, retry at a higher level). Options the lock
/// cannot serve in its current mode, or this manager cannot serve at all, are `FAILED_PRECONDITION`:
/// a blind retry does not help, and nothing in the server broke. A bad configuration (of the
/// manager, or of a run-once job) is `INTERNAL`.
impl From<LockError> for Status {
    fn from(error: LockError) -> Self {
        let code = match &error {
            LockError::InvalidKey(_) => Code::InvalidArgument,
            LockError::Timeout { .. } | LockError::Unavailable { .. } | LockError::Closed => {
                Code::Unavailable
            }
            LockError::NotHeld { .. } => Code::Aborted,
            LockError::Unsupported { .. } => Code::FailedPrecondition,
            LockError::Config(_) | LockError::InvalidJob { .. } => Code::Internal,
        };
        Status::new(code, error.to_string())
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::error::KeyError;

    fn code(error: LockError) -> Code {
        Status::from(error).code()
    }

    #[test]
    fn lock_errors_map_to_grpc_codes() {
        let key = || "accounts/42".to_owned();
        assert_eq!(
            code(LockError::InvalidKey(KeyError::Empty)),
            Code::InvalidArgument
        );
        let waited = Duration::from_secs(1);
        assert_eq!(
            code(LockError::Timeout { key: key(), waited }),
            Code::Unavailable
        );
        assert_eq!(
            code(LockError::unavailable("accounts/42", "refused")),
            Code::Unavailable
        );
        assert_eq!(code(LockError::Closed), Code::Unavailable);
        assert_eq!(code(LockError::NotHeld { key: key() }), Code::Aborted);
        let what = "fair locks on a quorum".to_owned();
        assert_eq!(
            code(LockError::Unsupported { key: key(), what }),
            Code::FailedPrecondition
        );
        assert_eq!(code(LockError::Config("bad".into())), Code::Internal);
        let status = Status::from(LockError::NotHeld { key: key() });
        assert!(status.message().contains("accounts/42"), "{status:?}");
    }
}
