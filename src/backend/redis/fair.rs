//! Fair (FIFO) locks on Redis: a queue per lock, grants made by the release script, heartbeats
//! that keep live waiters queued and let dead ones be evicted.

use super::call::Reads;
use super::{flag, names, server_ms, slot_hint, RedisBackend, ScriptCall};
use crate::backend::{AcquireRequest, Attempt, LockParty};
use crate::error::BoxError;
use crate::waiters::LockId;
use redis::Value;
use std::sync::Arc;

impl RedisBackend {
    pub(crate) async fn fair_try_acquire(
        &self,
        req: &AcquireRequest<'_>,
    ) -> Result<Attempt, BoxError> {
        // the owner's hold, when it is a plain one: the script makes it a hash
        let plain = (req.held).and_then(|held| {
            self.plain_hold(req.id, req.owner)
                .filter(|(t, _)| *t == held)
        });
        let call = self.fair_acquire_call(req, plain.as_ref());
        let answer: Value = self
            .invoke_within(slot_hint(req.id), &call, super::LATE_REPLY)
            .await?;
        let attempt = super::attempt(answer)?;
        if let Some((token, _)) = plain {
            self.after_fair_attempt(req.id, req.owner, token, &attempt);
        }
        Ok(attempt)
    }

    /// The fair acquire script's call for `req`, with the value of its owner's hold when that is
    /// a plain one (`plain`: its token and value).
    fn fair_acquire_call(
        &self,
        req: &AcquireRequest<'_>,
        plain: Option<&(u64, Arc<str>)>,
    ) -> ScriptCall {
        let id = req.id;
        let others = [
            names::queue(id),
            names::heartbeat(id, req.waiter),
            names::fence(id),
            names::waiters(id),
        ];
        let mut call = self.lock_call(&self.scripts.fair_acquire, id, &others);
        call.arg(&**req.owner)
            .arg(server_ms(req.lease))
            .arg(flag(req.will_wait))
            .arg(flag(req.queued))
            .arg(server_ms(self.eviction))
            .arg(&*self.channels.prefix(req.id))
            .arg(req.waiter);
        match req.held {
            Some(held) => call.arg(held),
            None => call.arg(""),
        };
        call.arg(plain.map_or("", |(_, value)| &**value));
        call.arg(req.about());
        call
    }

    /// Whether anybody but `leader` waits for `id` in Redis: a fair request queued last that is
    /// not `leader`'s, or a manager recorded as waiting in exclusive mode. Two reads in one
    /// write, no script.
    pub(crate) async fn queued_behind(&self, id: &LockId, leader: &str) -> Result<bool, BoxError> {
        let mut reads = redis::pipe();
        reads
            .cmd("LINDEX")
            .arg(names::queue(id))
            .arg(-1)
            .cmd("EXISTS")
            .arg(names::waiters(id));
        let (last, managers): (Option<String>, u64) =
            self.invoke(slot_hint(id), &Reads(reads)).await?;
        let others = last.is_some_and(|waiter| crate::backend::owner_of(&waiter) != leader);
        Ok(others || managers > 0)
    }

    /// `waiter` left the queue of `id`; a grant made to it (the lock's `#f` names it) was never
    /// used, and is dropped.
    pub(crate) async fn leave_queue(&self, id: &LockId, waiter: &str) -> Result<(), BoxError> {
        let mut call = ScriptCall::new(&self.scripts.fair_abandon, 4);
        call.key(&**id)
            .key(names::queue(id))
            .key(names::heartbeat(id, waiter))
            .key(names::fence(id))
            .arg(crate::backend::owner_of(waiter))
            .arg(waiter)
            .arg(&*self.channels.prefix(id))
            .arg(server_ms(self.eviction));
        let answer = self.invoke::<Value>(slot_hint(id), &call).await?;
        self.carry_on(id, &answer).await;
        Ok(())
    }

    pub(crate) async fn heartbeat(&self, batch: &[LockParty]) -> Result<Vec<bool>, BoxError> {
        self.per_slot(batch, |group| self.heartbeat_slot(group))
            .await
    }

    /// Heartbeat queued waiters whose locks share a slot.
    async fn heartbeat_slot(&self, batch: Vec<&LockParty>) -> Result<Vec<bool>, BoxError> {
        let mut call = ScriptCall::new(&self.scripts.heartbeat, 3 * batch.len());
        for waiter in &batch {
            call.key(&*waiter.id)
                .key(names::queue_of(&waiter.id, &waiter.owner))
                .key(names::heartbeat(&waiter.id, &waiter.owner));
        }
        call.arg(server_ms(self.eviction));
        let hint = batch.first().map_or(0, |w| slot_hint(&w.id));
        let states: Vec<i64> = self.invoke_idempotent(hint, &call).await?;
        Ok(states.into_iter().map(|state| state == 1).collect())
    }
}
