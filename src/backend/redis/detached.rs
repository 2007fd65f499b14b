//! A release nobody waits for (a guard dropped): written on its lock's link at once, its answer
//! settled by the link's reader, or a timeout by the same reader once the command timeout has
//! passed (the connection is then marked broken, as a caller's timer would mark it). Sent
//! through the background task instead, each release woke that task twice (once for the
//! release, once for its answer), often across threads (BENCHMARKS.md, "Through
//! HTTP"). The rare rest of a release (grants for waiters of this process, a plain lock a
//! re-entry made a hash, a script the server lost) goes to the background task.

use std::sync::Arc;
use std::time::Instant;

use redis::{ErrorKind, RedisError, RedisResult, ServerErrorKind, Value};

use super::link::was_not_sent;
use super::plain::{last_handed_out, made_a_hash, PlainHold};
use super::pool::BrokenFlag;
use super::{slot_hint, RedisBackend};
use crate::backend::ToRelease;
use crate::background::{Background, Outside};
use crate::ids::OwnerId;
use crate::waiters::LockId;

/// What a detached release sent: which call to make again should the server have lost its script.
enum Sent {
    /// A plain hold's release, with the last token handed out under it.
    Plain(PlainHold, Option<u64>),
    /// A lock hash's release, bound to a token if given.
    Hash(Option<u64>),
}

/// One detached release, from its sending to its answer.
struct Detached<A> {
    backend: Arc<RedisBackend>,
    id: LockId,
    owner: OwnerId,
    sent: Sent,
    broken: BrokenFlag,
    started: Instant,
    /// Dropped once the release is done (a cohort's succession), before `outside`.
    after: A,
    /// Counts the release as background work until it is done, and takes what it leaves to do.
    /// Declared last: dropped last, so that the shutdown waits for the succession too.
    outside: Outside,
}

impl RedisBackend {
    /// Release `hold` as [`Self::release`] does, without a task: the call is written on the
    /// lock's link now, and the link's reader settles its answer. `after` is dropped once the
    /// release is done. It comes back when the lock's connection is not an open link (the caller
    /// then releases in the background).
    pub(crate) fn release_detached<A: Send + 'static>(
        self: &Arc<Self>,
        hold: &ToRelease<'_>,
        after: A,
        background: &Background,
    ) -> Result<(), A> {
        let (id, owner, token) = (hold.id, hold.owner, hold.token);
        let Some((link, broken)) = self.pool.open_link(slot_hint(id)) else {
            return Err(after);
        };
        let (call, sent) = match self.plain.take(id, owner, token) {
            Some(plain) => {
                let last = Some(last_handed_out(token, hold.last_used));
                (
                    self.plain_release_call(id, &plain, last),
                    Sent::Plain(plain, last),
                )
            }
            None => {
                let token = Some(token);
                (self.release_hash_call(id, owner, token), Sent::Hash(token))
            }
        };
        let detached = Detached {
            backend: self.clone(),
            id: id.clone(),
            owner: owner.clone(),
            sent,
            broken,
            started: Instant::now(),
            after,
            outside: background.outside(),
        };
        link.send_packed_then(
            call.packed(),
            Box::new(move |answer| detached.settle(answer)),
            self.timeout,
        );
        Ok(())
    }
}

impl<A: Send + 'static> Detached<A> {
    /// Take the release's answer: done, unless its rest must run in the background.
    fn settle(self, answer: RedisResult<Value>) {
        crate::telemetry::redis_call(answer.is_ok(), self.started.elapsed());
        match answer.and_then(Value::extract_error) {
            // the holds left, or -1: the lock was not held (any more); nothing else to do
            Ok(answer @ Value::Int(_)) if !made_a_hash(&answer) => {}
            Err(err) if !lost_script(&err) && !was_not_sent(&err) => {
                if err.is_timeout() {
                    self.backend.stalled();
                }
                self.broken.check(&err);
                failed(&self.id, &err);
            }
            answer => self.finish_in_background(answer),
        }
    }

    /// The rest of the release: its grants handed over, the hash a re-entry made released, or
    /// the whole call made again (the server lost the script, which the call loads first, or
    /// the link had failed and never sent it: the call takes a fresh connection).
    fn finish_in_background(self, answer: RedisResult<Value>) {
        let background = self.outside.background().clone();
        background.finish(async move {
            let Detached {
                backend,
                id,
                owner,
                sent,
                after,
                outside,
                ..
            } = self;
            let finished = match (answer, sent) {
                (Ok(answer), Sent::Plain(hold, _)) => {
                    backend
                        .plain_released(&id, &owner, hold.token, answer)
                        .await
                }
                (Ok(answer), Sent::Hash(_)) => backend.released(&id, answer).await,
                (Err(_), Sent::Plain(hold, last)) => {
                    backend.plain_release(&id, &owner, hold, last).await
                }
                (Err(_), Sent::Hash(token)) => backend.release_hash(&id, &owner, token).await,
            };
            if let Err(err) = finished {
                failed(&id, &*err);
            }
            drop(after);
            drop(outside);
        });
    }
}

/// Log a release of lock `id` that failed: its lease runs out.
fn failed(id: &LockId, err: &dyn std::fmt::Display) {
    let lock = &**id;
    tracing::warn!(lock, error = %err, "background lock release failed; the lease will run out");
}

/// Whether `err` says the server lost the script (restarted, or its cache was flushed).
fn lost_script(err: &RedisError) -> bool {
    err.kind() == ErrorKind::Server(ServerErrorKind::NoScript)
}
