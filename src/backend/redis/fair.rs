//! Fair (FIFO) locks on Redis: a queue per lock, grants made by the release script, heartbeats
//! that keep live waiters queued and let dead ones be evicted.

use super::{flag, names, server_ms, slot_hint, RedisBackend, ScriptCall};
use crate::backend::{AcquireRequest, Attempt, LockParty};
use crate::error::BoxError;
use crate::waiters::LockId;

impl RedisBackend {
    pub(crate) async fn fair_try_acquire(
        &self,
        req: &AcquireRequest<'_>,
    ) -> Result<Attempt, BoxError> {
        let mut call = ScriptCall::new(&self.scripts.fair_acquire, 5);
        call.key(&**req.id)
            .key(names::queue(req.id))
            .key(names::heartbeat(req.id, req.waiter))
            .key(names::fence(req.id))
            .key(names::waiters(req.id))
            .arg(&**req.owner)
            .arg(server_ms(req.lease))
            .arg(flag(req.will_wait))
            .arg(flag(req.queued))
            .arg(server_ms(self.eviction))
            .arg(&*self.channels.prefix(req.id))
            .arg(req.waiter);
        let answer = self
            .invoke_within(slot_hint(req.id), &call, super::LATE_REPLY)
            .await?;
        super::attempt(answer)
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
        self.invoke::<i64>(slot_hint(id), &call).await.map(drop)
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
