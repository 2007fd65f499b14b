//! Takeover of dead holders on Redis: one script call (`takeover.lua`) probes the holders of a
//! batch of locks of one slot, marks the missing ones and ends the holds missing for their
//! holder's grace.

use std::time::Duration;

use futures_util::future::join_all;

use super::{server_ms, slot_hint, GrantArgs, RedisBackend, ScriptCall};
use crate::error::BoxError;
#[cfg(feature = "cluster")]
use crate::inbox_proof::InboxProof;
use crate::waiters::LockId;
#[cfg(feature = "cluster")]
use std::sync::Arc;

/// What one probe found of one lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Probed {
    /// Nothing to do: free, shared, its holder listens, or its holder is never taken over.
    Nothing,
    /// Its holder's manager is missing: the hold may be ended this many ms from now.
    Missing(u64),
    /// Its holder was dead for its grace: the hold ended, and the lock went on.
    Ended,
}

impl RedisBackend {
    /// Probe the holders of `batch` (locks of one server), in one script call per cluster slot
    /// (one call on a standalone server). Returns in how long a marked holder may be taken over
    /// at the earliest (`None`: none is marked).
    pub(crate) async fn probe_holders(
        &self,
        batch: &[LockId],
    ) -> Result<Option<Duration>, BoxError> {
        let groups = self.channels.group_by_slot(batch.iter().map(|id| &**id));
        let calls = groups.iter().map(|group| {
            let ids: Vec<&LockId> = group.iter().map(|&i| &batch[i]).collect();
            self.probe_slot(ids)
        });
        let mut soonest = None;
        for answer in join_all(calls).await {
            soonest = match (soonest, answer?) {
                (Some(a), Some(b)) => Some(std::cmp::min(a, b)),
                (a, b) => a.or(b),
            };
        }
        Ok(soonest)
    }

    /// Probe the holders of `batch` (locks of one slot) in one script call.
    async fn probe_slot(&self, batch: Vec<&LockId>) -> Result<Option<Duration>, BoxError> {
        let Some(first) = batch.first() else {
            return Ok(None);
        };
        let mut call = ScriptCall::new(&self.scripts.takeover, batch.len());
        for id in &batch {
            call.key(&***id);
        }
        call.arg(GrantArgs {
            claim_ms: server_ms(self.eviction),
            prefix: &self.channels.prefix(first),
        });
        let answers: Vec<i64> = self.invoke(slot_hint(first), &call).await?;
        let soonest = answers.into_iter().map(probed).filter_map(|p| match p {
            Probed::Missing(ms) => Some(ms),
            Probed::Nothing | Probed::Ended => None,
        });
        Ok(soonest.min().map(Duration::from_millis))
    }

    /// The proofs a hold of `id` counts on: on a cluster whose holds may be taken over, those of
    /// the manager's channel of the lock's slot; `None` elsewhere (the manager's one inbox).
    #[cfg(feature = "cluster")]
    pub(crate) fn slot_proof(&self, id: &LockId) -> Option<Arc<InboxProof>> {
        let inbox = self.cluster.as_ref().filter(|inbox| inbox.proves())?;
        Some(inbox.proof_of(super::slots::slot(id)))
    }
}

/// One answer of `takeover.lua`.
fn probed(answer: i64) -> Probed {
    match answer {
        -1 => Probed::Ended,
        ms if ms > 0 => Probed::Missing(ms.unsigned_abs()),
        _ => Probed::Nothing,
    }
}
