//! Takeover of dead holders on a quorum: every master probes its own part of a hold, and each
//! hold of this manager has a takeover watch that its masters' renewals move, one by one (the
//! module docs, "Why a dead holder's takeover excludes"; `quorum_proof.rs`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use futures_util::future::join_all;

use super::holds::Won;
use super::{bounded, QuorumBackend};
use crate::backend::LockParty;
use crate::error::BoxError;
use crate::inbox_proof::InboxProof;
use crate::quorum_proof::QuorumWatch;
use crate::waiters::LockId;

/// The takeover watches of this manager's quorum holds, by (lock, owner), with the token of the
/// hold each one watches: made with the hold, forgotten with its last release.
#[derive(Debug)]
pub(super) struct HoldWatches {
    /// Every master's inbox proofs, by master index.
    proofs: Arc<[Arc<InboxProof>]>,
    /// How many masters make a majority.
    quorum: usize,
    table: Mutex<HashMap<LockParty, (u64, Arc<QuorumWatch>)>>,
}

impl HoldWatches {
    pub(super) fn new(proofs: Vec<Arc<InboxProof>>, quorum: usize) -> Self {
        HoldWatches {
            proofs: proofs.into(),
            quorum,
            table: Mutex::default(),
        }
    }

    fn table(&self) -> MutexGuard<'_, HashMap<LockParty, (u64, Arc<QuorumWatch>)>> {
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// An attempt begun at `started` won the hold of `lock` under `token` on the masters `won`.
    /// Only a master that took the lock afresh counts: its new hold is named by no earlier
    /// takeover mark, while a re-entry deletes none. A hold kept (a re-entry) keeps its watch,
    /// unless that watch's deadline is past: then, as for a new hold, a new watch counts the
    /// masters that took it afresh, and fewer than a majority of them lose it at once.
    pub(super) fn made(&self, lock: &LockParty, token: u64, started: Instant, won: &[Won]) {
        if self.proofs.first().and_then(|p| p.grace()).is_none() {
            return;
        }
        let fresh = won.iter().filter(|(_, _, reentered)| !reentered);
        let fresh = fresh.map(|(master, _, _)| *master);
        let mut table = self.table();
        if let Some((_, watch)) = table.get(lock).filter(|(kept, _)| *kept == token) {
            if !watch.has_passed() {
                fresh.for_each(|master| watch.renewed(master, started));
                return;
            }
        }
        let watch = QuorumWatch::new(self.proofs.clone(), self.quorum, started, fresh);
        table.insert(lock.clone(), (token, Arc::new(watch)));
    }

    /// The watch of the hold of `lock` under `token`, if it has one (takeover is on).
    pub(super) fn get(&self, lock: &LockParty, token: u64) -> Option<Arc<QuorumWatch>> {
        let table = self.table();
        let (_, watch) = table.get(lock).filter(|(kept, _)| *kept == token)?;
        Some(watch.clone())
    }

    /// Master `master` made or renewed the owner's hold of the lock by a call begun at `at`.
    pub(super) fn renewed(&self, lock: &LockParty, master: usize, at: Instant) {
        let watch = self.table().get(lock).map(|(_, watch)| watch.clone());
        if let Some(watch) = watch {
            watch.renewed(master, at);
        }
    }

    /// The owner's last hold of the lock is released: its watch goes with it (its guards keep
    /// theirs).
    pub(super) fn forget(&self, lock: &LockParty) {
        self.table().remove(lock);
    }
}

impl QuorumBackend {
    /// The takeover watch of the hold of `lock` under `token` (see [`HoldWatches`]); `None`
    /// when takeover is off.
    pub(crate) fn takeover_watch(&self, lock: &LockParty, token: u64) -> Option<Arc<QuorumWatch>> {
        self.watches.get(lock, token)
    }

    /// Probe the holders of `batch` on every master: each one marks and ends its own part of
    /// a dead holder's holds (`takeover.lua`). Returns in how long a marked holder may be taken
    /// over at the earliest on any master. A master that fails its probe is logged and left
    /// out; the round fails only when none answered.
    pub(crate) async fn probe_holders(
        &self,
        batch: &[LockId],
    ) -> Result<Option<Duration>, BoxError> {
        let probes = self.nodes.iter().map(|node| {
            let probe = node.redis.probe_holders(batch);
            bounded(self.node_timeout, &node.up, probe)
        });
        let answers = join_all(probes).await;
        let mut soonest: Option<Duration> = None;
        let mut answered = 0;
        for (node, answer) in self.nodes.iter().zip(&answers) {
            match answer {
                Ok(due) => {
                    answered += 1;
                    soonest = match (soonest, *due) {
                        (Some(a), Some(b)) => Some(a.min(b)),
                        (a, b) => a.or(b),
                    };
                }
                Err(err) => {
                    tracing::debug!(master = %node.name, error = %err, "holder probe failed on a quorum master");
                }
            }
        }
        if answered == 0 {
            let answers: Vec<_> = answers.into_iter().enumerate().collect();
            return Err(self.down("holder probes", &answers));
        }
        Ok(soonest)
    }
}
