//! Grants that this manager's own releases made: Redis returns them in the release's answer
//! instead of publishing them, and the backend hands each to its waiter as the inbox hands a grant
//! message. A grant that stopped at its script's bound with waiters left is carried on here, at
//! once.

use redis::{FromRedisValue, Value};

use super::postman::parse_grant;
use super::{names, released, server_ms, slot_hint, RedisBackend, ScriptCall};
use crate::backend::{shared_kind, Released};
use crate::error::BoxError;
use crate::waiters::LockId;

/// A grant script's word for "stopped at my bound with waiters left: call again".
const MORE: &str = "more";

impl RedisBackend {
    /// A release script's answer: the holds left (-1: none), or the grants of the freed lock `id`
    /// to waiters of this manager, one per line, and [`MORE`] last when its grant stopped at
    /// its bound.
    pub(super) async fn released(&self, id: &LockId, answer: Value) -> Result<Released, BoxError> {
        if let Value::BulkString(grants) = &answer {
            if self.hand_over(id, grants).await {
                self.grant_on(id).await;
            }
            return Ok(Released::Freed);
        }
        Ok(released(i64::from_redis_value(answer)?))
    }

    /// A script's answer that may say [`MORE`] (the withdrawals of waiters): carry its grant on.
    pub(super) async fn carry_on(&self, id: &LockId, answer: &Value) {
        if matches!(answer, Value::BulkString(word) if word == MORE.as_bytes()) {
            self.grant_on(id).await;
        }
    }

    /// Carry on the grant of `id` that stopped at its script's bound with waiters left: one
    /// bounded call after another, at once, until one says the rest may wait (granted, or held).
    /// Each call gets through a bound's worth of the queue. Should one fail, the waiters left
    /// learn of the room from their next heartbeat.
    pub(super) async fn grant_on(&self, id: &LockId) {
        let mut call = ScriptCall::new(&self.scripts.grant_on, 5);
        call.key(&**id)
            .key(names::queue(id))
            .key(names::fence(id))
            .key(names::holders(id))
            .key(names::shared_queue(id))
            .arg(&*self.channels.prefix(id))
            .arg(server_ms(self.eviction));
        loop {
            match self.invoke::<Value>(slot_hint(id), &call).await {
                Ok(Value::BulkString(word)) if word == MORE.as_bytes() => {}
                Ok(_) => return,
                Err(err) => {
                    tracing::debug!(lock = &**id, error = %err, "could not carry a grant on");
                    return;
                }
            }
        }
    }

    /// Hand each grant to its waiter. A waiter that stopped waiting passes its grant on, as the
    /// inbox does with a grant message nobody takes. Returns whether the answer ended in
    /// [`MORE`].
    async fn hand_over(&self, id: &LockId, grants: &[u8]) -> bool {
        let grants = String::from_utf8_lossy(grants);
        let mut more = false;
        for grant in grants.lines() {
            if grant == MORE {
                more = true;
                continue;
            }
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
        more
    }
}
