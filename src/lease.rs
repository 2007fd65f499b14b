//! The lost-lease signal: a lease's deadline, moved on by each renewal up to the hold's ceiling (if
//! it has one), and the one-way switch that fires when the lease is known lost or the deadline
//! passed. It imports nothing of the crate but the inbox proofs (primitives too): the watchdog
//! moves the deadline, and guards read it. A hold that may be taken over as dead has a second
//! deadline, counted from its inbox's proofs (`inbox_proof.rs`), or on a quorum from a majority of
//! its masters' (`quorum_proof.rs`); the signal fires at the earlier.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Instant;

use crate::inbox_proof::InboxProof;
use crate::quorum_proof::QuorumWatch;

use tokio::sync::Notify;

/// Fires once, when a lease is known to be lost, or may have run out: a lease is valid until a
/// deadline that each renewal moves later, and once that deadline passes unrenewed the lease counts
/// as lost (for good: a renewal that lands later does not bring it back), whether or not a renewal
/// round has noticed yet.
#[derive(Debug)]
pub(crate) struct LostSignal {
    /// The lock name, as given: every report of the loss names it.
    key: Arc<str>,
    lost: AtomicBool,
    notify: Notify,
    /// How long the lease is known valid, and the ceiling past which no renewal moves it.
    validity: Mutex<Validity>,
    /// The latest moment after which the server is known to have held the lease: the start of
    /// the last call it answered with the hold (the acquisition, or a renewal that found it).
    proven: Mutex<Option<Instant>>,
    /// Set when the hold may be taken over as dead: the second deadline's inputs.
    takeover: OnceLock<Takeover>,
}

/// What a hold's takeover deadline counts on.
#[derive(Debug)]
enum Takeover {
    /// The inbox of one server (see [`InboxProof::deadline`]).
    One {
        proof: Arc<InboxProof>,
        /// The start of the call that made the hold, as the proofs count it.
        made: Instant,
        /// The start of the last call that made or renewed the hold: it deleted any takeover
        /// mark.
        renewed: Mutex<Instant>,
    },
    /// The inboxes of a quorum's masters, each renewed on its own (see [`QuorumWatch`]).
    Quorum(Arc<QuorumWatch>),
}

impl Drop for LostSignal {
    fn drop(&mut self) {
        if let Some(Takeover::One { proof, made, .. }) = self.takeover.get() {
            proof.forgotten(*made);
        }
    }
}

/// How long a lease is known valid.
#[derive(Debug, Clone, Copy)]
struct Validity {
    /// The lease is known valid until here (`None`: it does not run out by time).
    until: Option<Instant>,
    /// The hold ends here at the latest, however it is renewed (`None`: no ceiling).
    ceiling: Option<Instant>,
}

impl Validity {
    /// Lower the ceiling to `ceiling` (a later one leaves it), and the deadline with it.
    fn cap(&mut self, ceiling: Instant) {
        let ceiling = self.ceiling.map_or(ceiling, |c| c.min(ceiling));
        self.ceiling = Some(ceiling);
        self.until = Some(self.until.map_or(ceiling, |until| until.min(ceiling)));
    }
}

impl LostSignal {
    pub(crate) fn new(key: Arc<str>, valid_until: Option<Instant>) -> Self {
        let validity = Validity {
            until: valid_until,
            ceiling: None,
        };
        LostSignal {
            key,
            lost: AtomicBool::new(false),
            notify: Notify::new(),
            validity: Mutex::new(validity),
            proven: Mutex::new(None),
            takeover: OnceLock::new(),
        }
    }

    /// Make this hold's signal fire, too, when the hold may be taken over as dead (see
    /// [`InboxProof::deadline`]); `made` is the start of the call that made the hold. A signal
    /// already watched keeps its watch (a re-entry joins the first hold's).
    pub(crate) fn watch_takeover(&self, proof: &Arc<InboxProof>, made: Instant) {
        if proof.grace().is_none() {
            return;
        }
        let takeover = Takeover::One {
            proof: proof.clone(),
            made,
            renewed: Mutex::new(made),
        };
        if self.takeover.set(takeover).is_ok() {
            proof.counted_on(made);
            self.notify.notify_waiters();
        }
    }

    /// Make this hold's signal fire, too, when a majority of the quorum masters that granted it
    /// may have taken it over (see [`QuorumWatch`]). A signal already watched keeps its watch.
    pub(crate) fn watch_quorum(&self, watch: Arc<QuorumWatch>) {
        if self.takeover.set(Takeover::Quorum(watch)).is_ok() {
            self.notify.notify_waiters();
        }
    }

    /// A call begun at `at` renewed the hold on its one server: it deleted any takeover mark, so
    /// the takeover deadline counts from here at least. A quorum hold's masters are told one by
    /// one, by the quorum backend ([`QuorumWatch::renewed`]): nothing to do here.
    pub(crate) fn renewed(&self, at: Instant) {
        if let Some(Takeover::One { renewed, .. }) = self.takeover.get() {
            let mut renewed = renewed.lock().unwrap_or_else(|p| p.into_inner());
            *renewed = (*renewed).max(at);
        }
    }

    /// The moment the lease may be lost: the lease's deadline (`valid_until`) or, if earlier,
    /// the takeover deadline.
    fn deadline(&self, valid_until: Option<Instant>) -> Option<Instant> {
        let dead = match self.takeover.get() {
            None => return valid_until,
            Some(Takeover::One { proof, renewed, .. }) => {
                proof.deadline(*renewed.lock().unwrap_or_else(|p| p.into_inner()))
            }
            Some(Takeover::Quorum(watch)) => watch.deadline(),
        };
        match (valid_until, dead) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// This signal, with a ceiling at `ceiling` (if any): no renewal makes the lease valid past
    /// it, so the signal fires there at the latest.
    pub(crate) fn capped(self, ceiling: Option<Instant>) -> Self {
        if let Some(ceiling) = ceiling {
            self.validity().cap(ceiling);
        }
        self
    }

    /// Lower the ceiling to `ceiling` (a re-entry asked for an earlier one); the signal fires
    /// there at the latest. A ceiling already past fires it.
    pub(crate) fn cap(&self, ceiling: Instant) {
        self.validity().cap(ceiling);
        // a waiter sleeps until the deadline it read: wake it to read the new one
        self.notify.notify_waiters();
        self.is_lost();
    }

    /// The ceiling of the hold, if it has one (see [`LostSignal::capped`]).
    pub(crate) fn ceiling(&self) -> Option<Instant> {
        self.validity().ceiling
    }

    /// The server answered a call begun at `at` with the hold: it held the lease after `at`.
    pub(crate) fn prove(&self, at: Instant) {
        let mut proven = self.proven.lock().unwrap_or_else(|p| p.into_inner());
        *proven = Some(proven.map_or(at, |before| before.max(at)));
    }

    /// The latest moment after which the server is known to have held the lease (see
    /// [`LostSignal::prove`]); `None` before any proof.
    pub(crate) fn proven(&self) -> Option<Instant> {
        *self.proven.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The lock name, as given.
    pub(crate) fn key(&self) -> &str {
        &self.key
    }

    pub(crate) fn fire(&self) {
        self.lost.store(true, Ordering::SeqCst);
        self.notify.notify_waiters();
    }

    fn validity(&self) -> MutexGuard<'_, Validity> {
        self.validity.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A renewal made the lease valid until `until` (the ceiling, if earlier). False when it
    /// came too late: the lease had already run out (or was lost), and stays lost.
    pub(crate) fn extend(&self, until: Instant) -> bool {
        let mut validity = self.validity();
        if self.is_lost_at(self.deadline(validity.until), Instant::now()) {
            drop(validity);
            self.fire();
            return false;
        }
        let until = validity.ceiling.map_or(until, |ceiling| until.min(ceiling));
        if let Some(deadline) = validity.until.as_mut() {
            *deadline = (*deadline).max(until);
        }
        true
    }

    fn is_lost_at(&self, valid_until: Option<Instant>, now: Instant) -> bool {
        self.lost.load(Ordering::SeqCst) || valid_until.is_some_and(|d| now >= d)
    }

    pub(crate) fn is_lost(&self) -> bool {
        let until = self.validity().until;
        let lost = self.is_lost_at(self.deadline(until), Instant::now());
        if lost {
            // latch it: a deadline that passed stays passed
            self.lost.store(true, Ordering::SeqCst);
        }
        lost
    }

    /// Resolves once the lease is lost (see [`LostSignal::is_lost`]).
    pub(crate) async fn wait(&self) {
        loop {
            let notified = self.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.is_lost() {
                return;
            }
            let until = self.validity().until;
            match self.deadline(until) {
                // at the deadline, look again: a renewal may have moved it
                Some(deadline) => {
                    tokio::select! {
                        _ = notified => {}
                        _ = tokio::time::sleep_until(deadline.into()) => {}
                    }
                }
                None => notified.await,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn no_renewal_moves_the_deadline_past_the_ceiling() {
        let now = Instant::now();
        let ceiling = now + Duration::from_secs(10);
        let lost = LostSignal::new(Arc::from("k"), Some(now + Duration::from_secs(1)));
        let lost = lost.capped(Some(ceiling));
        assert!(lost.extend(now + Duration::from_secs(60)));
        assert_eq!(lost.validity().until, Some(ceiling));
        // a later ceiling leaves it; an earlier one lowers it, and the deadline with it
        lost.cap(now + Duration::from_secs(20));
        assert_eq!(lost.ceiling(), Some(ceiling));
        lost.cap(now + Duration::from_secs(5));
        assert_eq!(lost.validity().until, Some(now + Duration::from_secs(5)));
        assert!(!lost.is_lost());
        // a ceiling already past loses the lease at once
        lost.cap(now);
        assert!(lost.is_lost());
    }

    #[test]
    fn a_hold_that_may_be_taken_over_is_lost_a_grace_after_its_last_proof() {
        let grace = Duration::from_millis(100);
        let proof = Arc::new(InboxProof::new(Some((grace, Duration::from_millis(3)))));
        let now = Instant::now();
        let earlier = now - Duration::from_millis(500);
        proof.subscribed(earlier, earlier);
        let lost = LostSignal::new(Arc::from("k"), Some(now + Duration::from_secs(30)));
        lost.watch_takeover(&proof, now);
        assert!(!lost.is_lost());
        // the young hold needs no proof yet; the old ones below do
        assert_eq!(proof.due_every(now), None);
        // made long ago, renewed now: the renewal moves the deadline
        let old = LostSignal::new(Arc::from("k"), Some(now + Duration::from_secs(30)));
        old.watch_takeover(&proof, earlier + Duration::from_millis(1));
        old.renewed(now);
        assert!(!old.is_lost());
        // neither renewed nor proven for a grace: lost, for good
        let stale = LostSignal::new(Arc::from("k"), Some(now + Duration::from_secs(30)));
        stale.watch_takeover(&proof, earlier + Duration::from_millis(1));
        assert!(stale.is_lost());
        stale.renewed(now);
        assert!(stale.is_lost());
        assert_eq!(proof.due_every(now), Some(grace / 3));
        drop((lost, old, stale));
        assert_eq!(proof.due_every(now + grace), None);
    }

    #[test]
    fn a_quorum_hold_is_lost_when_its_majority_deadline_passes() {
        let grace = Duration::from_millis(100);
        let proofs: Arc<[Arc<InboxProof>]> = (0..3)
            .map(|_| Arc::new(InboxProof::new(Some((grace, Duration::from_millis(3))))))
            .collect();
        let now = Instant::now();
        let fresh = LostSignal::new(Arc::from("k"), Some(now + Duration::from_secs(30)));
        fresh.watch_quorum(Arc::new(QuorumWatch::new(
            proofs.clone(),
            2,
            now,
            [0, 1, 2],
        )));
        assert!(!fresh.is_lost());
        // made long ago on every master, no proof since: lost; a one-server renewal is no help
        let made = now - Duration::from_millis(500);
        let stale = LostSignal::new(Arc::from("k"), Some(now + Duration::from_secs(30)));
        stale.watch_quorum(Arc::new(QuorumWatch::new(proofs, 2, made, [0, 1, 2])));
        stale.renewed(now);
        assert!(stale.is_lost());
    }

    #[test]
    fn a_ceiling_bounds_a_lease_that_does_not_run_out_by_time() {
        let at = Instant::now() + Duration::from_secs(3);
        let lost = LostSignal::new(Arc::from("k"), None).capped(Some(at));
        assert_eq!(lost.validity().until, Some(at));
    }
}
