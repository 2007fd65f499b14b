//! The watchdog's batches on Redis: renewals of many leases in one script call, and the split of
//! a batch by cluster slot (one script call may touch one slot only).

use std::time::Duration;

use super::call::Reads;
use super::{server_ms, slot_hint, RedisBackend, ScriptCall};
use crate::backend::LockParty;
use crate::error::BoxError;
use crate::waiters::LockId;

impl RedisBackend {
    /// Run `call` on the parties of `batch` whose locks share a slot, each group at once (a
    /// script's keys must all be in one slot of a cluster; a standalone server takes the batch
    /// whole), and put the answers back in the batch's order.
    pub(super) async fn per_slot<'a, F, Fut>(
        &self,
        batch: &'a [LockParty],
        call: F,
    ) -> Result<Vec<bool>, BoxError>
    where
        F: Fn(Vec<&'a LockParty>) -> Fut,
        Fut: std::future::Future<Output = Result<Vec<bool>, BoxError>>,
    {
        let groups = self.channels.group_by_slot(batch.iter().map(|p| &*p.id));
        let calls = groups
            .iter()
            .map(|group| call(group.iter().map(|&i| &batch[i]).collect()));
        let answers = futures_util::future::join_all(calls).await;
        let mut flags = vec![false; batch.len()];
        for (group, answer) in groups.iter().zip(answers) {
            for (&i, flag) in group.iter().zip(answer?) {
                flags[i] = flag;
            }
        }
        Ok(flags)
    }

    pub(crate) async fn renew(
        &self,
        batch: &[LockParty],
        lease: Duration,
    ) -> Result<Vec<bool>, BoxError> {
        self.per_slot(batch, |group| self.renew_slot(group, lease))
            .await
    }

    /// Whether `owner` still holds `id`: one read, no script, nothing changed. A lock that is
    /// not of the kind the owner took (a plain lock that became a hash, or the other way round)
    /// is an error, which proves nothing.
    pub(crate) async fn holds(&self, id: &LockId, owner: &str) -> Result<bool, BoxError> {
        let mut read = redis::pipe();
        match self.plain_hold(id, owner) {
            Some((_, value)) => {
                read.cmd("GET").arg(&**id);
                let (held,): (Option<String>,) = self.invoke(slot_hint(id), &Reads(read)).await?;
                Ok(held.as_deref() == Some(&*value))
            }
            None => {
                read.cmd("HEXISTS").arg(&**id).arg(owner);
                let (held,): (bool,) = self.invoke(slot_hint(id), &Reads(read)).await?;
                Ok(held)
            }
        }
    }

    /// Renew leases whose locks share a slot.
    async fn renew_slot(
        &self,
        batch: Vec<&LockParty>,
        lease: Duration,
    ) -> Result<Vec<bool>, BoxError> {
        let mut call = ScriptCall::new(&self.scripts.renew, batch.len());
        for lock in &batch {
            call.key(&*lock.id);
        }
        call.arg(server_ms(lease));
        for lock in &batch {
            match self.plain_hold(&lock.id, &lock.owner) {
                // a plain lock is a string: the script reads it as one, by its value
                Some((_, value)) => call.arg(format!("={value}")),
                None => call.arg(&*lock.owner),
            };
        }
        let hint = batch.first().map_or(0, |lock| slot_hint(&lock.id));
        let renewed: Vec<i64> = self.invoke_idempotent(hint, &call).await?;
        Ok(renewed.into_iter().map(|r| r == 1).collect())
    }
}
