//! The plain path: a free exclusive or fair lock taken without a script. Four commands in one
//! write set the lock as a string, its owner id (`SET NX PX`; after a `!` in fair mode), and read
//! the fencing counter, the server's clock and whether fair requests queue (and, for a fair
//! request, whether managers wait in exclusive mode); the token is worked out here as the
//! scripts' `next_token` does. Redis runs no Lua for it, and the release of such a lock is a
//! short script: together they cost Redis about half the scripted cycle (BENCHMARKS.md, "Uncontended
//! acquire + release").
//!
//! No re-entry may miss a plain lock's holds. A cohort's leader takes it in exclusive mode: its
//! owner id is made for the one hold. In fair mode, a request whose owner held nothing of the
//! lock takes it, and a re-entry gives the fair script the token, which makes the plain lock a
//! hash (`unplain` in `common.lua`). Releases, renewals and the undo of a late reply are bound to
//! the hold by the owner id, and take a hash for what it became. The scripts read a plain lock as
//! `hash_fields` in `common.lua` says.

use std::sync::Arc;
use std::time::Instant;

use redis::{FromRedisValue, RedisResult, Value};

mod holds;

pub(super) use holds::PlainHold;
pub(crate) use holds::PlainHolds;

use super::call::{RoundTrip, ScriptCall};
use super::packed::Packed;
use super::pool::Channel;
use super::{names, server_ms, slot_hint, GrantArgs, RedisBackend, LATE_REPLY};
use crate::backend::TOKEN_BLOCK;
use crate::backend::{AcquireRequest, Attempt, Released};
use crate::error::BoxError;
use crate::ids::OwnerId;
use crate::options::Mode;
use crate::waiters::LockId;

/// The plain release's answer when a re-entry made the lock a hash (`plain_release.lua`).
const MADE_A_HASH: i64 = -2;

/// The plain path's commands, sent together in one write: `SET NX PX`, then the fencing counter,
/// the server's clock and whether fair requests queue. No `MULTI` is needed: once the lock is
/// taken nobody else changes its counter, and the clock read after taking it is the floor of the
/// token as well as one read before would be (tokens issued before the lock was taken are below
/// both). A queue that forms after the lock was taken waits behind it as for any holder.
struct Take(Packed);

impl Take {
    fn commands(req: &AcquireRequest<'_>, value: &str) -> Self {
        // sized once: growing the bytes costs the client more than writing them
        let mut take = Packed::with_capacity(160 + 4 * req.id.len() + value.len());
        take.command("SET")
            .arg(&**req.id)
            .arg(value)
            .arg("NX")
            .arg("PX")
            .arg(server_ms(req.lease));
        take.command("GET").arg(names::fence(req.id));
        take.command("TIME");
        take.command("EXISTS").arg(names::queue(req.id));
        if req.mode == Mode::Fair {
            // managers waiting in exclusive mode: a fair request tells them to queue (the script)
            take.arg(names::waiters(req.id));
        }
        Take(take)
    }
}

impl RoundTrip for Take {
    async fn run<T: FromRedisValue>(&self, conn: &mut Channel) -> RedisResult<T> {
        let values = conn.query_packed_all(&self.0).await?;
        Ok(T::from_redis_value(Value::Array(values))?)
    }
}

/// What the plain path's commands answered: whether `SET NX` took the lock; then, unless one of
/// the others failed, the fencing counter, the server's clock in microseconds and whether a fair
/// queue exists.
struct Answer {
    taken: bool,
    rest: Option<(u64, u64, bool)>,
}

/// Read the four answers: `None` when the server refused `SET` (an ACL's refusal), `rest` `None`
/// when it refused one of the others.
fn answer(values: Vec<Value>) -> Result<Option<Answer>, BoxError> {
    let [set, fence, time, queued]: [Value; 4] = values
        .try_into()
        .map_err(|v| format!("unexpected answer of the plain path: {v:?}"))?;
    let taken = match set {
        Value::Nil => false,
        Value::Okay => true,
        Value::ServerError(_) => return Ok(None),
        other => return Err(format!("SET NX answered {other:?}").into()),
    };
    let rest = (|| {
        let fence: Option<u64> = FromRedisValue::from_redis_value(fence).ok()?;
        let clock = clock_micros(&time)?;
        let queued: u64 = FromRedisValue::from_redis_value(queued).ok()?;
        Some((fence.unwrap_or(0), clock, queued > 0))
    })();
    Ok(Some(Answer { taken, rest }))
}

/// The server's clock in microseconds, from the answer of `TIME` (seconds and microseconds, as
/// two strings). Read here, not by redis-rs's conversion of a pair, which cost the client more
/// than the rest of the answer together.
fn clock_micros(time: &Value) -> Option<u64> {
    let Value::Array(parts) = time else {
        return None;
    };
    let [Value::BulkString(secs), Value::BulkString(micros)] = &parts[..] else {
        return None;
    };
    let number = |digits: &[u8]| std::str::from_utf8(digits).ok()?.parse::<u64>().ok();
    Some(number(secs)? * 1_000_000 + number(micros)?)
}

impl RedisBackend {
    /// Whether `req` may take its lock on the plain path, on one server (not a cluster), in an
    /// attempt that has recorded no wait, with no other request of this process waiting for the
    /// lock (it is likely held, and `SET NX` would only add a round trip before the script): a
    /// cohort leader's in exclusive mode; in fair mode, a leader's or one whose owner held
    /// nothing of the lock (a re-entry makes its plain lock a hash).
    pub(super) fn plain_path(&self, req: &AcquireRequest<'_>) -> bool {
        #[cfg(feature = "cluster")]
        if self.cluster.is_some() {
            return false;
        }
        if req.queued || req.others_waiting || self.plain.refused() {
            return false;
        }
        match req.mode {
            Mode::Exclusive => req.leader,
            Mode::Fair => req.leader || req.held.is_none(),
            _ => false,
        }
    }

    /// The token and value of `owner`'s plain hold of `id`, if it has one: the watchdog renews
    /// it by its value, and a fair re-entry gives both to the script that makes it a hash.
    pub(super) fn plain_hold(&self, id: &LockId, owner: &str) -> Option<(u64, Arc<str>)> {
        (self.plain.latest(id, owner)).map(|hold| (hold.token, hold.value))
    }

    /// A fair attempt that gave the plain hold under `token` was answered `attempt`: once it
    /// acquired, that hold, if it still was a plain one, is a hash (and otherwise it had run out).
    pub(super) fn after_fair_attempt(
        &self,
        id: &LockId,
        owner: &OwnerId,
        token: u64,
        attempt: &Attempt,
    ) {
        if matches!(attempt, Attempt::Acquired { .. }) {
            self.plain.take(id, owner, token);
        }
    }

    /// Take the lock of `req` on the plain path if it is free: `None` when it is not (or fair
    /// requests queue for it), and the script must look.
    pub(super) async fn plain_acquire(
        &self,
        req: &AcquireRequest<'_>,
    ) -> Result<Option<Attempt>, BoxError> {
        let hint = slot_hint(req.id);
        let value = self
            .plain
            .value(req.owner, req.mode == Mode::Fair, &req.about());
        let take = Take::commands(req, &value);
        let values: Vec<Value> = self.invoke_within(hint, &take, LATE_REPLY).await?;
        let Some(answer) = answer(values)? else {
            self.plain.refuse();
            return Ok(None);
        };
        if !answer.taken {
            return Ok(None);
        }
        let Some((fence, clock, queued)) = answer.rest else {
            // taken, but the token cannot be told (the commands after SET were refused): no
            // token was handed out, so none is retired
            let hold = PlainHold {
                token: 0,
                clock: 0,
                taken: Instant::now(),
                value,
            };
            self.plain.refuse();
            self.undo_take(req, hold).await?;
            return Ok(None);
        };
        let token = clock.max(fence + 1);
        self.plain.saw_server_clock(clock);
        let hold = PlainHold {
            token,
            clock,
            taken: Instant::now(),
            value,
        };
        if queued {
            // Fair requests queue for the free lock (its holder's lease ran out): they come
            // first. The release hands it to the head of their queue; nobody got the token.
            self.undo_take(req, hold).await?;
            return Ok(None);
        }
        self.plain.insert(req.id, req.owner, hold);
        Ok(Some(Attempt::Acquired { token }))
    }

    /// Give back the lock `req` took on the plain path but may not keep. Rare, and boxed: inline,
    /// its future would make every attempt's twice as large, and each attempt is moved to the
    /// heap whole.
    async fn undo_take(&self, req: &AcquireRequest<'_>, hold: PlainHold) -> Result<(), BoxError> {
        Box::pin(self.plain_release(req.id, req.owner, hold, None)).await?;
        Ok(())
    }

    /// Release `owner`'s hold of `id` under `token` if it is a plain one (`None` when it is not).
    /// `last_used` is the last token handed out under it, when known; else its whole block
    /// counts as handed out.
    pub(super) async fn release_if_plain(
        &self,
        id: &LockId,
        owner: &OwnerId,
        token: u64,
        last_used: Option<u64>,
    ) -> Option<Result<Released, BoxError>> {
        let hold = self.plain.take(id, owner, token)?;
        let last = last_handed_out(token, last_used);
        Some(self.plain_release(id, owner, hold, Some(last)).await)
    }

    /// Release the plain hold `hold` of `owner` on `id`, under which `last` was the last token
    /// handed out (`None`: none was). Should a re-entry have made it a hash meanwhile, the release
    /// script releases it as one, by its token.
    pub(super) async fn plain_release(
        &self,
        id: &LockId,
        owner: &OwnerId,
        hold: PlainHold,
        last: Option<u64>,
    ) -> Result<Released, BoxError> {
        let call = self.plain_release_call(id, &hold, last);
        let answer = self.invoke(slot_hint(id), &call).await?;
        self.plain_released(id, owner, hold.token, answer).await
    }

    /// The script call that releases the plain hold `hold` of `id` (see [`Self::plain_release`]).
    pub(super) fn plain_release_call(
        &self,
        id: &LockId,
        hold: &PlainHold,
        last: Option<u64>,
    ) -> ScriptCall {
        let others = [names::waiters(id), names::queue(id), names::fence(id)];
        let mut call = self.lock_call(&self.scripts.plain_release, id, &others);
        call.arg(&*hold.value);
        // the next token must pass the last one handed out: the counter keeps it unless the
        // server's clock has passed it
        match last.filter(|&last| hold.may_lead_clock(last)) {
            Some(last) => call.arg(last),
            None => call.arg(""),
        };
        call.arg(GrantArgs {
            claim_ms: server_ms(self.eviction),
            prefix: &self.channels.prefix(id),
        });
        call
    }

    /// What a plain release's `answer` leaves to do for the hold under `token`: release the hash
    /// a re-entry made of the lock, or hand over the grants it made.
    pub(super) async fn plain_released(
        &self,
        id: &LockId,
        owner: &OwnerId,
        token: u64,
        answer: Value,
    ) -> Result<Released, BoxError> {
        if made_a_hash(&answer) {
            // rare, and boxed: inline it would double the size of every release's future
            return Box::pin(self.release_hash(id, owner, Some(token))).await;
        }
        self.released(id, answer).await
    }
}

/// The last token handed out under the plain hold made under `token`: `last_used` when known,
/// else the last of its block.
pub(super) fn last_handed_out(token: u64, last_used: Option<u64>) -> u64 {
    last_used.unwrap_or(token + u64::from(TOKEN_BLOCK) - 1)
}

/// Whether a plain release answered that a re-entry made the lock a hash.
pub(super) fn made_a_hash(answer: &Value) -> bool {
    *answer == Value::Int(MADE_A_HASH)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_clock_is_read_from_the_answer_of_time() {
        let words = |secs: &str, micros: &str| {
            let word = |w: &str| Value::BulkString(w.as_bytes().to_vec());
            Value::Array(vec![word(secs), word(micros)])
        };
        let time = words("1764331200", "000042");
        assert_eq!(clock_micros(&time), Some(1_764_331_200_000_042));
        assert_eq!(clock_micros(&words("1764331200", "4x")), None);
        assert_eq!(clock_micros(&Value::Nil), None);
    }
}
