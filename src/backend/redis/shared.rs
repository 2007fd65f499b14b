//! Shared locks on Redis (read/write locks and semaphores): every hold has its own owner, token and
//! lease; waiters queue in order, and a release grants the room it leaves to the waiters at the
//! head of the queue, one message per manager (none for the releasing manager's own waiters: their
//! grants come back in the release's answer).

use super::{flag, names, server_ms, slot_hint, RedisBackend, ScriptCall};
use crate::backend::{owner_of, shared_family, shared_kind_of, AcquireRequest, Attempt, Released};
use crate::error::BoxError;
use crate::ids::OwnerId;
use crate::waiters::LockId;

impl RedisBackend {
    pub(crate) async fn shared_try_acquire(
        &self,
        req: &AcquireRequest<'_>,
    ) -> Result<Attempt, BoxError> {
        let family = shared_family(req.mode).unwrap_or_default();
        let mut call = ScriptCall::new(&self.scripts.shared_acquire, 7);
        call.key(&**req.id)
            .key(names::holders(req.id))
            .key(names::shared_queue(req.id))
            .key(names::heartbeat(req.id, req.waiter))
            .key(names::fence(req.id))
            .key(names::waiters(req.id))
            .key(names::queue(req.id))
            .arg(&**req.owner)
            .arg(server_ms(req.lease))
            .arg(flag(req.will_wait))
            .arg(flag(req.queued))
            .arg(server_ms(self.eviction))
            .arg(&*self.channels.prefix(req.id))
            .arg(req.waiter)
            .arg(&family)
            .arg(shared_kind_of(req.mode).unwrap_or('n').to_string());
        match req.held {
            Some(held) => call.arg(held),
            None => call.arg(""),
        };
        call.arg(req.about());
        let answer = self
            .invoke_within(slot_hint(req.id), &call, super::LATE_REPLY)
            .await?;
        super::attempt(answer)
    }

    pub(crate) async fn shared_release(
        &self,
        id: &LockId,
        owner: &OwnerId,
        token: Option<u64>,
    ) -> Result<Released, BoxError> {
        let mut call = ScriptCall::new(&self.scripts.shared_release, 4);
        call.key(&**id)
            .key(names::holders(id))
            .key(names::shared_queue(id))
            .key(names::fence(id))
            .arg(&**owner)
            .arg(&*self.channels.prefix(id))
            .arg(server_ms(self.eviction));
        if let Some(token) = token {
            call.arg(token);
        }
        let answer = self.invoke(slot_hint(id), &call).await?;
        self.released(id, answer).await
    }

    /// `waiter` left the queue of the shared lock `id`; a grant made to it and never used is
    /// dropped, and the room it leaves granted on.
    pub(crate) async fn shared_leave_queue(
        &self,
        id: &LockId,
        waiter: &str,
    ) -> Result<(), BoxError> {
        let mut call = ScriptCall::new(&self.scripts.shared_abandon, 5);
        call.key(&**id)
            .key(names::holders(id))
            .key(names::shared_queue(id))
            .key(names::heartbeat(id, waiter))
            .key(names::fence(id))
            .arg(owner_of(waiter))
            .arg(waiter)
            .arg(&*self.channels.prefix(id))
            .arg(server_ms(self.eviction));
        let answer = self.invoke::<redis::Value>(slot_hint(id), &call).await?;
        self.carry_on(id, &answer).await;
        Ok(())
    }
}
