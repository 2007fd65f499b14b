//! The postman of a manager's inbox: hands each message to the one local waiter it concerns, and
//! passes on what no local waiter takes.

use std::sync::{Arc, OnceLock};

use crate::waiters::{LockId, WaitRegistry};

/// A message no local waiter could take: the backend must pass it on.
#[derive(Debug)]
pub(crate) enum Unclaimed {
    /// "Lock K is free", but nobody here waits for K any more.
    Wake(LockId),
    /// A fair grant to a waiter (`<owner>|<n>`) that stopped waiting.
    Grant { lock: LockId, waiter: String },
}

/// Parse a grant message, `g|<lock>|<waiter>|<token>`, into the lock, the waiter (`<owner>|<n>`,
/// or `<owner>|<n>|<kind>` for a shared lock) and the token. A lock id is `{N:K}` with every `}`
/// of N and K escaped, so its first `}` ends it; waiters and tokens contain no `}`.
pub(super) fn parse_grant(msg: &str) -> Option<(&str, &str, u64)> {
    let rest = msg.strip_prefix("g|")?;
    let lock = &rest[..=rest.find('}')?];
    let (waiter, token) = rest[lock.len()..].strip_prefix('|')?.rsplit_once('|')?;
    waiter.contains('|').then_some(())?;
    Some((lock, waiter, token.parse().ok()?))
}

pub(crate) type UnclaimedHandler = Box<dyn Fn(Unclaimed) + Send + Sync>;

/// Hands each message to the local waiter it concerns.
pub(crate) struct Postman {
    pub(crate) waiters: Arc<WaitRegistry>,
    /// Set when the inbox starts running; no message can concern this manager before its first
    /// request, which comes later.
    pub(crate) unclaimed: OnceLock<UnclaimedHandler>,
}

impl Postman {
    /// Deliver one message: a wake-up ("lock K is free") or grants (one per line).
    pub(crate) fn deliver(&self, text: &str) {
        if text.starts_with("g|") {
            // a shared lock's release may grant several waiters of this manager: one per line
            text.lines().for_each(|grant| self.deliver_grant(grant));
        } else {
            let lock = LockId::new(text);
            if !self.waiters.wake_one(&lock) {
                self.pass_on(Unclaimed::Wake(lock));
            }
        }
    }

    fn deliver_grant(&self, text: &str) {
        let Some((lock, waiter, token)) = parse_grant(text) else {
            tracing::debug!(message = text, "malformed grant message ignored");
            return;
        };
        let lock = LockId::new(lock);
        if !self.waiters.grant(&lock, waiter, token) {
            self.pass_on(Unclaimed::Grant {
                lock,
                waiter: waiter.to_owned(),
            });
        }
    }

    fn pass_on(&self, message: Unclaimed) {
        if let Some(pass_on) = self.unclaimed.get() {
            pass_on(message);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grants_parse_even_when_the_lock_name_has_bars() {
        assert_eq!(
            parse_grant("g|{ns:a|b}|m1:7|3|1700000000000001"),
            Some(("{ns:a|b}", "m1:7|3", 1_700_000_000_000_001))
        );
        assert_eq!(parse_grant("{ns:a}"), None);
        assert_eq!(parse_grant("g|{ns:a}|m1:7|3|x"), None);
        assert_eq!(parse_grant("g|{ns:a}|1700000000000001"), None);
        assert_eq!(
            parse_grant("g|{ns:a|b}|m1:7|3|r|1700000000000001"),
            Some(("{ns:a|b}", "m1:7|3|r", 1_700_000_000_000_001)),
            "a shared lock's waiter names its kind"
        );
    }
}
