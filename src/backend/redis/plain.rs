//! The plain path: a free exclusive lock taken by a cohort's leader without a script. Four
//! commands in one write set the lock as a string, the leader's owner id (`SET NX PX`), and read the fencing
//! counter, the server's clock and whether fair requests queue; the token is worked out here as
//! the scripts' `next_token` does. Redis runs no Lua for it, and the release of such a lock is a
//! short script: together they cost Redis about half the scripted cycle (BENCHMARKS.md, "The
//! plain path").
//!
//! Only a cohort's leader takes it: its owner id is made for the one hold, so no re-entry ever
//! meets the plain lock, and its release, renewal and the undo of a late reply are bound to that
//! hold by the owner id. The scripts read a plain lock as `hash_fields` in `common.lua` says.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use redis::{FromRedisValue, RedisResult, Value};

use super::call::RoundTrip;
use super::pool::Channel;
use super::{names, server_ms, slot_hint, RedisBackend, LATE_REPLY};
use crate::backend::TOKEN_BLOCK;
use crate::backend::{AcquireRequest, Attempt, Released};
use crate::error::BoxError;
use crate::ids::{IdMap, OwnerId};
use crate::waiters::LockId;

/// How much longer than its block's lead on the server's clock a hold must have lasted, by this
/// process's clock, for its release to skip retiring the block: clocks run at slightly different
/// rates, and this dwarfs any drift over a lease.
const CLOCK_MARGIN: Duration = Duration::from_millis(1);

/// The plain holds of one backend, by lock: one each, but for a moment two when a lost one is
/// released while the next leader takes the lock anew.
#[derive(Debug, Default)]
pub(crate) struct PlainHolds {
    table: Mutex<Table>,
    /// The server refused one of the plain path's commands (an ACL written for the scripts):
    /// every lock is taken by the script from then on.
    refused: AtomicBool,
}

/// The plain holds by lock, each with its owner.
type Table = IdMap<LockId, Vec<(Arc<str>, PlainHold)>>;

/// One plain hold: its token, and how long it must last for its block of tokens to fall behind
/// the server's clock.
#[derive(Debug, Clone, Copy)]
struct PlainHold {
    token: u64,
    /// When the hold's last token is below the server's clock, by this process's clock.
    block_behind: Instant,
}

impl PlainHolds {
    fn lock(&self) -> MutexGuard<'_, Table> {
        self.table
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn refuse(&self) {
        if !self.refused.swap(true, Ordering::Relaxed) {
            tracing::info!("Redis refused the plain path's commands: locks are taken by script");
        }
    }

    /// Whether `owner` holds `id` on the plain path.
    pub(crate) fn contains(&self, id: &LockId, owner: &str) -> bool {
        self.get(id, owner).is_some()
    }

    fn get(&self, id: &LockId, owner: &str) -> Option<PlainHold> {
        let table = self.lock();
        let holds = table.get(id)?;
        holds
            .iter()
            .find(|(o, _)| &**o == owner)
            .map(|(_, hold)| *hold)
    }

    /// Take `owner`'s plain hold of `id` out of the table: its release is under way, and whatever
    /// Redis answers, nothing is left to renew or release (a failed release leaves the lease to
    /// run out, as a failed script call does).
    fn take(&self, id: &LockId, owner: &str) -> Option<PlainHold> {
        let mut table = self.lock();
        let holds = table.get_mut(id)?;
        let at = holds.iter().position(|(o, _)| &**o == owner)?;
        let (_, hold) = holds.swap_remove(at);
        if holds.is_empty() {
            table.remove(id);
        }
        Some(hold)
    }

    fn insert(&self, id: &LockId, owner: &OwnerId, hold: PlainHold) {
        let mut table = self.lock();
        table
            .entry(id.clone())
            .or_default()
            .push((owner.as_arc().clone(), hold));
    }
}

/// The plain path's commands, sent together in one write: `SET NX PX`, then the fencing counter,
/// the server's clock and whether fair requests queue. No `MULTI` is needed: once the lock is
/// taken nobody else changes its counter, and the clock read after taking it is the floor of the
/// token as well as one read before would be (tokens issued before the lock was taken are below
/// both). A queue that forms after the lock was taken waits behind it as for any holder.
struct Take(redis::Pipeline);

impl Take {
    fn commands(req: &AcquireRequest<'_>) -> Self {
        let mut pipe = redis::pipe();
        pipe.ignore_errors()
            .cmd("SET")
            .arg(&**req.id)
            .arg(&**req.owner)
            .arg("NX")
            .arg("PX")
            .arg(server_ms(req.lease))
            .cmd("GET")
            .arg(names::fence(req.id))
            .cmd("TIME")
            .cmd("EXISTS")
            .arg(names::queue(req.id));
        Take(pipe)
    }
}

impl RoundTrip for Take {
    async fn run<T: FromRedisValue>(&self, conn: &mut Channel) -> RedisResult<T> {
        conn.pipeline(&self.0).await
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
        let (secs, micros): (u64, u64) = FromRedisValue::from_redis_value(time).ok()?;
        let queued: u64 = FromRedisValue::from_redis_value(queued).ok()?;
        Some((fence.unwrap_or(0), secs * 1_000_000 + micros, queued > 0))
    })();
    Ok(Some(Answer { taken, rest }))
}

impl RedisBackend {
    /// Whether `req` may take its lock on the plain path: a cohort leader's exclusive attempt
    /// that has recorded no wait, with no other request of this process behind it, on one
    /// server (not a cluster).
    pub(super) fn plain_path(&self, req: &AcquireRequest<'_>) -> bool {
        #[cfg(feature = "cluster")]
        if self.cluster.is_some() {
            return false;
        }
        req.leader
            && !self.plain.refused.load(Ordering::Relaxed)
            && req.mode == crate::options::Mode::Exclusive
            && !req.queued
            && !req.others_waiting
    }

    /// Take the lock of `req` on the plain path if it is free: `None` when it is not (or fair
    /// requests queue for it), and the script must look.
    pub(super) async fn plain_acquire(
        &self,
        req: &AcquireRequest<'_>,
    ) -> Result<Option<Attempt>, BoxError> {
        let hint = slot_hint(req.id);
        let take = Take::commands(req);
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
                block_behind: Instant::now(),
            };
            self.plain.refuse();
            self.plain_release(req.id, req.owner, hold).await?;
            return Ok(None);
        };
        let token = clock.max(fence + 1);
        let ahead = token + u64::from(TOKEN_BLOCK) - 1 - clock;
        let hold = PlainHold {
            token,
            block_behind: Instant::now() + Duration::from_micros(ahead) + CLOCK_MARGIN,
        };
        if queued {
            // Fair requests queue for the free lock (its holder's lease ran out): they come
            // first. The release hands it to the head of their queue.
            self.plain_release(req.id, req.owner, hold).await?;
            return Ok(None);
        }
        self.plain.insert(req.id, req.owner, hold);
        Ok(Some(Attempt::Acquired { token }))
    }

    /// Release `owner`'s hold of `id` if it is a plain one (`None` when it is not).
    pub(super) async fn release_if_plain(
        &self,
        id: &LockId,
        owner: &OwnerId,
    ) -> Option<Result<Released, BoxError>> {
        let hold = self.plain.take(id, owner)?;
        Some(self.plain_release(id, owner, hold).await)
    }

    /// Release the plain hold `hold` of `owner` on `id`.
    async fn plain_release(
        &self,
        id: &LockId,
        owner: &OwnerId,
        hold: PlainHold,
    ) -> Result<Released, BoxError> {
        let retire = if Instant::now() >= hold.block_behind {
            "P"
        } else {
            "p"
        };
        let mut call = self.release_call(id, owner, Some(hold.token));
        call.arg(retire);
        let answer = self.invoke(slot_hint(id), &call).await?;
        self.released(id, answer).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plain_hold_is_taken_out_of_the_table_once() {
        let holds = PlainHolds::default();
        let id = LockId::new("{tower-lock:k}".to_owned());
        let (first, second) = (OwnerId::new("m:1"), OwnerId::new("m:2"));
        let hold = |token| PlainHold {
            token,
            block_behind: Instant::now(),
        };
        holds.insert(&id, &first, hold(10));
        holds.insert(&id, &second, hold(20));
        assert!(holds.contains(&id, "m:1"));
        assert_eq!(holds.take(&id, "m:1").map(|h| h.token), Some(10));
        assert!(holds.take(&id, "m:1").is_none(), "a release takes it once");
        assert!(!holds.contains(&id, "m:1"));
        assert_eq!(holds.take(&id, "m:2").map(|h| h.token), Some(20));
        assert!(holds.lock().is_empty(), "nothing is left behind");
    }
}
