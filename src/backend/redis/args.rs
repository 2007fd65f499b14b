//! How the scripts' arguments are spelled: flags and milliseconds, as Redis reads them.

use std::time::Duration;

/// A flag argument: `"1"` or `"0"`.
pub(crate) fn flag(b: bool) -> &'static str {
    if b {
        "1"
    } else {
        "0"
    }
}

/// A duration in whole milliseconds, at least 1 (Redis refuses a zero expiry).
pub(crate) fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX).max(1)
}

/// How long Redis is asked to keep a lease the client counts as `lease`: the drift allowance
/// more (see [`crate::backend::drift`]).
pub(crate) fn server_ms(lease: Duration) -> u64 {
    millis(lease + crate::backend::drift(lease))
}
