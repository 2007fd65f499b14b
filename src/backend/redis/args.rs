//! How the scripts' arguments are spelled: flags and milliseconds, as Redis reads them.

use std::time::Duration;

use redis::{RedisWrite, ToRedisArgs};

use super::packed::write_joined;
use crate::ids::decimal;

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
    millis(lease.saturating_add(crate::backend::drift(lease)))
}

/// The claim lease (ms) and the inbox channel prefix of a release's grant, written as one
/// argument (`<ms> <prefix>`): only a release that finds waiters reads them, and each argument
/// costs Redis time on every call.
pub(crate) struct GrantArgs<'a> {
    pub(crate) claim_ms: u64,
    pub(crate) prefix: &'a str,
}

impl ToRedisArgs for GrantArgs<'_> {
    fn write_redis_args<W: ?Sized + RedisWrite>(&self, out: &mut W) {
        let mut digits = [0u8; 20];
        let ms = decimal(self.claim_ms, &mut digits);
        write_joined(out, &[ms, b" ", self.prefix.as_bytes()]);
    }
}
