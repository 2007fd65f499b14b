//! Grants that this manager's own releases made: Redis returns them in the release's answer
//! instead of publishing them, and the backend hands each to its waiter as the inbox hands a grant
//! message.

use redis::{FromRedisValue, Value};

use super::postman::parse_grant;
use super::{released, RedisBackend};
use crate::backend::{shared_kind, Released};
use crate::error::BoxError;
use crate::waiters::LockId;

impl RedisBackend {
    /// A release script's answer: the holds left (-1: none), or the grants of the freed lock `id`
    /// to waiters of this manager, one per line.
    pub(super) async fn released(&self, id: &LockId, answer: Value) -> Result<Released, BoxError> {
        if let Value::BulkString(grants) = &answer {
            self.hand_over(id, grants).await;
            return Ok(Released::Freed);
        }
        Ok(released(i64::from_redis_value(answer)?))
    }

    /// Hand each grant to its waiter. A waiter that stopped waiting passes its grant on, as the
    /// inbox does with a grant message nobody takes.
    async fn hand_over(&self, id: &LockId, grants: &[u8]) {
        let grants = String::from_utf8_lossy(grants);
        for grant in grants.lines() {
            let Some((_, waiter, token)) = parse_grant(grant) else {
                tracing::debug!(lock = &**id, grant, "malformed grant in a release's answer");
                continue;
            };
            if self.waiters.grant(id, waiter, token) {
                continue;
            }
            // rare, and boxed: inline it would double the size of every release's future
            let passed = match shared_kind(waiter) {
                Some(_) => Box::pin(self.shared_leave_queue(id, waiter)).await,
                None => Box::pin(self.leave_queue(id, waiter)).await,
            };
            if let Err(err) = passed {
                tracing::debug!(error = %err, "could not pass an unclaimed grant on");
            }
        }
    }
}
