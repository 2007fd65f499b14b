//! What the acquire and release scripts answer, read into the backend's outcomes, and how an
//! exclusive attempt tells its script whether it waits.

use std::time::Duration;

use crate::backend::{AcquireRequest, Attempt, Released};
use crate::error::BoxError;

/// An acquire script's answer: the fencing token (> 0) when acquired; when busy, -1 - the
/// holder's remaining lease in ms; when the lock is held or queued for in another family of modes,
/// that family's name (`exclusive`, `fair`, `read/write`, `semaphore`); `upgrade` when a reader
/// asked to write.
pub(super) fn attempt(answer: redis::Value) -> Result<Attempt, BoxError> {
    use crate::options::Mode;
    let other = |held| Ok(Attempt::OtherMode { held });
    let answer = match answer {
        redis::Value::Int(answer) => answer,
        redis::Value::BulkString(name) => match &name[..] {
            b"exclusive" => return other(Mode::Exclusive),
            b"fair" => return other(Mode::Fair),
            b"read/write" => return other(Mode::Write),
            b"semaphore" => return other(Mode::Semaphore(0)),
            b"upgrade" => return Ok(Attempt::NoUpgrade),
            _ => return Err(format!("unexpected answer of an acquire script: {name:?}").into()),
        },
        other => return Err(format!("unexpected answer of an acquire script: {other:?}").into()),
    };
    Ok(match u64::try_from(answer) {
        Ok(token) => Attempt::Acquired { token },
        _ => Attempt::Busy {
            ttl: u64::try_from(-1 - answer).ok().map(Duration::from_millis),
        },
    })
}

/// How an exclusive acquire attempt waits, for the acquire script: '' it does not, 'w' it will,
/// 'o' other requests of this process wait too, 'r' an earlier attempt found the lock busy.
pub(super) fn wait_mode(req: &AcquireRequest<'_>) -> &'static str {
    match (req.will_wait, req.others_waiting, req.queued) {
        (false, _, _) => "",
        (true, false, false) => "w",
        (true, true, false) => "wo",
        (true, false, true) => "wr",
        (true, true, true) => "wor",
    }
}

/// A release script's answer: holds left, or -1 when not held.
pub(super) fn released(left: i64) -> Released {
    match left {
        l if l < 0 => Released::NotHeld,
        0 => Released::Freed,
        _ => Released::StillHeld,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::Mode;
    use redis::Value;

    #[test]
    fn an_acquire_answer_is_a_token_or_the_holders_remaining_lease() {
        let read = |answer| attempt(answer).expect("an answer");
        assert!(matches!(
            read(Value::Int(1)),
            Attempt::Acquired { token: 1 }
        ));
        assert!(matches!(
            read(Value::Int(1_700_000_000_000_001)),
            Attempt::Acquired {
                token: 1_700_000_000_000_001
            }
        ));
        let busy = |answer| match read(Value::Int(answer)) {
            Attempt::Busy { ttl } => ttl,
            other => panic!("{answer} read as {other:?}"),
        };
        assert_eq!(busy(-1), Some(Duration::ZERO));
        assert_eq!(busy(-30_001), Some(Duration::from_secs(30)));
        let named = |name: &str| read(Value::BulkString(name.as_bytes().to_vec()));
        assert!(matches!(
            named("fair"),
            Attempt::OtherMode { held: Mode::Fair }
        ));
        assert!(matches!(
            named("semaphore"),
            Attempt::OtherMode {
                held: Mode::Semaphore(_)
            }
        ));
        assert!(matches!(named("upgrade"), Attempt::NoUpgrade));
        assert!(attempt(Value::BulkString(b"held".to_vec())).is_err());
    }
}
