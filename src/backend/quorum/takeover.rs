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
                fresh.for_each(|master| watch.granted(master, started));
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

    /// Master `master` granted the owner's hold of the lock afresh after the attempt's verdict,
    /// by a call begun at `at` (see [`QuorumWatch::granted`]).
    pub(super) fn granted(&self, lock: &LockParty, master: usize, at: Instant) {
        if let Some(watch) = self.current(lock) {
            watch.granted(master, at);
        }
    }

    /// Master `master` renewed the owner's hold of the lock by a call begun at `at` (see
    /// [`QuorumWatch::renewed`]).
    pub(super) fn renewed(&self, lock: &LockParty, master: usize, at: Instant) {
        if let Some(watch) = self.current(lock) {
            watch.renewed(master, at);
        }
    }

    fn current(&self, lock: &LockParty) -> Option<Arc<QuorumWatch>> {
        self.table().get(lock).map(|(_, watch)| watch.clone())
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

#[cfg(test)]
mod tests {
    use super::*;

    const GRACE: Duration = Duration::from_millis(500);

    fn lock() -> LockParty {
        LockParty {
            id: LockId::new("{ns:k}"),
            owner: Arc::from("m:1"),
        }
    }

    /// Three masters, each with a live inbox proven since `since`.
    fn watches(since: Instant) -> (HoldWatches, Vec<Arc<InboxProof>>) {
        let proofs: Vec<Arc<InboxProof>> = (0..3)
            .map(|_| Arc::new(InboxProof::new(Some((GRACE, Duration::from_millis(7))))))
            .collect();
        for proof in &proofs {
            proof.subscribed(since, since);
        }
        (HoldWatches::new(proofs.clone(), 2), proofs)
    }

    #[test]
    fn only_masters_that_took_the_lock_afresh_count() {
        let t0 = Instant::now();
        let (watches, proofs) = watches(t0);
        let made = t0 + Duration::from_millis(10);
        // masters 0 and 1 took it afresh; master 2 re-entered a hold left from before
        let won = [(0, 11, false), (1, 12, false), (2, 13, true)];
        watches.made(&lock(), 12, made, &won);
        let watch = watches.get(&lock(), 12).expect("a watch");
        assert!(watches.get(&lock(), 99).is_none(), "another hold's token");
        // master 2's proofs do not count: masters 0 and 1 must both keep it
        let allowance = GRACE - Duration::from_millis(7);
        proofs[2].answered(made + Duration::from_millis(900));
        proofs[1].answered(made + Duration::from_millis(300));
        assert_eq!(watch.deadline(), Some(made + allowance));
        // a renewal that found the owner on master 2 does not make it count; a late fresh grant
        // of the hold does
        watches.renewed(&lock(), 2, made + Duration::from_millis(1));
        assert_eq!(watch.deadline(), Some(made + allowance));
        watches.granted(&lock(), 2, made + Duration::from_millis(1));
        let expected = made + Duration::from_millis(300) + allowance;
        assert_eq!(watch.deadline(), Some(expected));
    }

    #[test]
    fn a_reentry_keeps_the_watch_and_a_new_hold_gets_its_own() {
        let t0 = Instant::now();
        let (watches, _) = watches(t0);
        watches.made(&lock(), 12, t0, &[(0, 11, false), (1, 12, false)]);
        let first = watches.get(&lock(), 12).expect("a watch");
        // a re-entry under the same token: the same watch, moved on where taken afresh (master
        // 0 re-entered, which deletes no takeover mark: it stays where it was)
        let later = t0 + Duration::from_millis(100);
        watches.made(
            &lock(),
            12,
            later,
            &[(0, 11, true), (1, 15, false), (2, 14, false)],
        );
        let again = watches.get(&lock(), 12).expect("a watch");
        assert!(Arc::ptr_eq(&first, &again));
        let allowance = GRACE - Duration::from_millis(7);
        assert_eq!(again.deadline(), Some(later + allowance));
        // the hold lost and taken anew: a watch of its own, the old one left to its guards
        watches.made(&lock(), 20, later, &[(1, 19, false), (2, 20, false)]);
        let new = watches.get(&lock(), 20).expect("a watch");
        assert!(!Arc::ptr_eq(&first, &new));
        watches.forget(&lock());
        assert!(watches.get(&lock(), 20).is_none());
    }

    #[test]
    fn takeover_off_makes_no_watch() {
        let off = (0..3).map(|_| Arc::new(InboxProof::new(None))).collect();
        let off = HoldWatches::new(off, 2);
        off.made(&lock(), 1, Instant::now(), &[(0, 1, false), (1, 1, false)]);
        assert!(off.get(&lock(), 1).is_none());
    }
}
