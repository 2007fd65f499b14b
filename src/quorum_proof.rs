//! The takeover deadline of a quorum hold: when a majority of the masters that granted it may no
//! longer be sure to keep it. It imports nothing of the crate but the inbox proofs.
//!
//! Each master judges its own part of a quorum hold, as one server does (DESIGN.md, "Dead
//! holders"): it may end that part once the manager's inbox there has been missing for the grace.
//! So each granting master has a deadline of its own, counted from its own inbox's proofs and the
//! last call that made or renewed the hold there. A new holder needs a majority of the masters:
//! while a majority of ours have their deadline ahead, any majority of the new holder shares a
//! master with them, which still holds our lock. One master down, or its inbox gone, loses
//! nothing: a minority failure is what a quorum survives.
//!
//! Implementation notes: once the deadline was seen past, it stays past (a renewal that lands
//! later does not bring the hold back), as a lease's does.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use crate::inbox_proof::InboxProof;

/// The moment a hold is lost, given the takeover deadlines of the masters that granted it: the
/// `quorum`-th latest of them, past which fewer than `quorum` deadlines lie ahead. `None` when
/// fewer than `quorum` masters granted it: no majority keeps it at all.
pub(crate) fn majority_deadline(mut deadlines: Vec<Instant>, quorum: usize) -> Option<Instant> {
    let last = quorum.checked_sub(1)?;
    deadlines.sort_unstable_by(|a, b| b.cmp(a));
    deadlines.get(last).copied()
}

/// What one quorum hold's takeover deadline counts on: every master's inbox proofs, and per
/// master that granted the hold, the start of the last call that made or renewed it there.
#[derive(Debug)]
pub(crate) struct QuorumWatch {
    /// Every master's inbox proofs, by master index.
    proofs: Arc<[Arc<InboxProof>]>,
    /// How many masters make a majority.
    quorum: usize,
    /// The start of the call that made the hold, as the proofs count it.
    made: Instant,
    parts: Mutex<Parts>,
}

/// The masters' parts of one hold.
#[derive(Debug)]
struct Parts {
    /// Per master, the start of the last call that made or renewed the hold there (`None`: it
    /// did not grant the hold, or never answered that it did).
    renewed: Vec<Option<Instant>>,
    /// The deadline, once it was seen past: the hold is lost for good.
    passed: Option<Instant>,
}

impl QuorumWatch {
    /// The watch of a hold made by a call begun at `made`, which the masters `granted` granted;
    /// every master's inbox proves itself while the watch lives.
    pub(crate) fn new(
        proofs: Arc<[Arc<InboxProof>]>,
        quorum: usize,
        made: Instant,
        granted: impl IntoIterator<Item = usize>,
    ) -> Self {
        let mut renewed = vec![None; proofs.len()];
        for master in granted {
            if let Some(slot) = renewed.get_mut(master) {
                *slot = Some(made);
            }
        }
        for proof in proofs.iter() {
            proof.counted_on(made);
        }
        let parts = Mutex::new(Parts {
            renewed,
            passed: None,
        });
        QuorumWatch {
            proofs,
            quorum,
            made,
            parts,
        }
    }

    fn parts(&self) -> MutexGuard<'_, Parts> {
        self.parts.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Master `master` granted the hold afresh, by a call begun at `at` (a late answer, or a
    /// re-entry that took the lock there anew): it counts from then on. A deadline already past
    /// stays past.
    pub(crate) fn granted(&self, master: usize, at: Instant) {
        self.moved(master, at, true);
    }

    /// Master `master` renewed the owner's hold by a call begun at `at` (it deleted any takeover
    /// mark there). Only a master that granted this hold counts: a renewal goes by owner, and on
    /// another master it may have found an earlier hold of the owner that a release still on its
    /// way there drops. A deadline already past stays past.
    pub(crate) fn renewed(&self, master: usize, at: Instant) {
        self.moved(master, at, false);
    }

    fn moved(&self, master: usize, at: Instant, granted: bool) {
        let mut parts = self.parts();
        if parts.passed.is_some() {
            return;
        }
        if let Some(deadline) = self.deadline_of(&parts) {
            if deadline <= Instant::now() {
                parts.passed = Some(deadline);
                return;
            }
        }
        match parts.renewed.get_mut(master) {
            Some(Some(before)) => *before = (*before).max(at),
            Some(slot) if granted => *slot = Some(at),
            _ => {}
        }
    }

    /// Whether the deadline is past: the hold is lost for good, and a new hold needs a new watch.
    pub(crate) fn has_passed(&self) -> bool {
        let mut parts = self.parts();
        let passed = parts.passed.is_some()
            || (self.deadline_of(&parts)).is_some_and(|deadline| deadline <= Instant::now());
        if passed && parts.passed.is_none() {
            parts.passed = self.deadline_of(&parts);
        }
        passed
    }

    /// The moment the hold may be taken over, by the holder's clock; `None` when takeover is off.
    pub(crate) fn deadline(&self) -> Option<Instant> {
        let parts = self.parts();
        parts.passed.or_else(|| self.deadline_of(&parts))
    }

    fn deadline_of(&self, parts: &Parts) -> Option<Instant> {
        let mut deadlines = Vec::with_capacity(parts.renewed.len());
        for (proof, renewed) in self.proofs.iter().zip(&parts.renewed) {
            if let Some(renewed) = renewed {
                deadlines.push(proof.deadline(*renewed)?);
            }
        }
        Some(majority_deadline(deadlines, self.quorum).unwrap_or(self.made))
    }
}

impl Drop for QuorumWatch {
    fn drop(&mut self) {
        for proof in self.proofs.iter() {
            proof.forgotten(self.made);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    const GRACE: Duration = Duration::from_millis(500);
    const DRIFT: Duration = Duration::from_millis(7);

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// When a hold of the masters with these deadlines (`None`: not granted) is lost, by the
    /// rule under test, the way `lost_at` would have it.
    fn lost_at(deadlines: &[Option<Instant>], quorum: usize) -> Option<Instant> {
        majority_deadline(deadlines.iter().flatten().copied().collect(), quorum)
    }

    #[test]
    fn a_hold_is_lost_once_fewer_than_a_majority_of_its_masters_keep_it() {
        let t = Instant::now();
        // three masters granted; the second latest deadline decides
        let all = [Some(t + ms(100)), Some(t + ms(900)), Some(t + ms(400))];
        assert_eq!(lost_at(&all, 2), Some(t + ms(400)));
        // five masters, two of them not granting: the three that did must all keep it
        let five = [
            Some(t + ms(300)),
            None,
            Some(t + ms(700)),
            None,
            Some(t + ms(500)),
        ];
        assert_eq!(lost_at(&five, 3), Some(t + ms(300)));
        // fewer than a majority granted: no deadline keeps it
        assert_eq!(lost_at(&[Some(t), None, None], 2), None);
        assert_eq!(lost_at(&[], 0), None);
    }

    /// The seeded defects. "Min over all masters" is safe but loses every hold when one master
    /// is down; "any one master" (the latest deadline) keeps holds that may be taken over.
    #[test]
    fn neither_the_earliest_nor_the_latest_master_decides() {
        let t = Instant::now();
        // master 0 is down: its inbox proved itself last at t, the others keep proving
        let one_down = [Some(t + ms(490)), Some(t + ms(5000)), Some(t + ms(5000))];
        let min_of_all = one_down.iter().flatten().min().copied();
        assert_eq!(
            min_of_all,
            Some(t + ms(490)),
            "min would lose the hold at once"
        );
        assert_eq!(
            lost_at(&one_down, 2),
            Some(t + ms(5000)),
            "a majority keeps it"
        );
        // The unsafe case: the holder's inbox is cut on masters 0 and 1 (deadlines t + 490 ms),
        // only master 2 still sees it. Past t + 490 ms, masters 0 and 1 may end their parts, and
        // a waiter holding 0 and 1 has a majority while this hold still counts on master 2.
        let cut_on_two = [Some(t + ms(490)), Some(t + ms(490)), Some(t + ms(5000))];
        let any_one = cut_on_two.iter().flatten().max().copied();
        assert_eq!(
            any_one,
            Some(t + ms(5000)),
            "any one master would keep it: unsafe"
        );
        assert_eq!(lost_at(&cut_on_two, 2), Some(t + ms(490)));
    }

    fn proofs(n: usize) -> Arc<[Arc<InboxProof>]> {
        (0..n)
            .map(|_| Arc::new(InboxProof::new(Some((GRACE, DRIFT)))))
            .collect()
    }

    #[test]
    fn each_master_counts_its_own_proofs_and_renewals() {
        let proofs = proofs(3);
        let t0 = Instant::now() - ms(2000);
        for proof in proofs.iter() {
            proof.subscribed(t0, t0);
        }
        let made = t0 + ms(10);
        let watch = QuorumWatch::new(proofs.clone(), 2, made, [0, 1, 2]);
        let allowance = GRACE - DRIFT;
        // no proof since the hold began: lost a grace after it, for good
        assert_eq!(watch.deadline(), Some(made + allowance));
        assert!(watch.has_passed());
        // a later proof on every master does not bring it back
        for proof in proofs.iter() {
            proof.answered(made + ms(1500));
        }
        watch.renewed(0, made + ms(1600));
        assert_eq!(watch.deadline(), Some(made + allowance));
        // a fresh hold: master 0 proves itself later than the others; the second latest decides
        let now = Instant::now();
        let fresh = QuorumWatch::new(proofs.clone(), 2, now, [0, 1, 2]);
        proofs[0].answered(now + ms(300));
        proofs[1].answered(now + ms(100));
        assert_eq!(fresh.deadline(), Some(now + ms(100) + allowance));
        // a renewal on master 2 alone moves its own deadline only
        fresh.renewed(2, now + ms(200));
        assert_eq!(fresh.deadline(), Some(now + ms(200) + allowance));
        assert!(!fresh.has_passed());
        // every master's inbox proves itself while a hold counts on it, until it goes
        assert!(proofs.iter().all(|p| p.due_every(now + GRACE).is_some()));
        drop((watch, fresh));
        assert!(proofs.iter().all(|p| p.due_every(now + GRACE).is_none()));
    }

    #[test]
    fn a_master_counts_only_once_it_granted_the_hold() {
        let proofs = proofs(3);
        let now = Instant::now();
        let watch = QuorumWatch::new(proofs.clone(), 2, now, [0, 1]);
        let allowance = GRACE - DRIFT;
        proofs[2].subscribed(now - ms(5), now - ms(5));
        proofs[2].answered(now + ms(400));
        assert_eq!(watch.deadline(), Some(now + allowance));
        // a renewal there may have found an earlier hold of the owner: it adds nothing
        watch.renewed(2, now + ms(1));
        assert_eq!(watch.deadline(), Some(now + allowance));
        // its late grant of this very hold does
        watch.granted(2, now + ms(1));
        assert_eq!(watch.deadline(), Some(now + allowance));
        proofs[1].subscribed(now - ms(5), now - ms(5));
        proofs[1].answered(now + ms(300));
        assert_eq!(watch.deadline(), Some(now + ms(300) + allowance));
    }

    #[test]
    fn takeover_off_has_no_deadline() {
        let off: Arc<[Arc<InboxProof>]> = (0..3).map(|_| Arc::new(InboxProof::new(None))).collect();
        let watch = QuorumWatch::new(off, 2, Instant::now(), [0, 1, 2]);
        assert_eq!(watch.deadline(), None);
        assert!(!watch.has_passed());
    }
}
