//! Proof that a manager's inbox is subscribed: what a hold that may be taken over as dead counts
//! its second deadline from. It imports nothing of the crate.
//!
//! Another manager may end such a hold once this manager's inbox channel has had no subscriber for
//! the takeover grace, seen twice that far apart with no renewal between (DESIGN.md, "Dead
//! holders"). The holder must know first: its lost signal fires at the later of its last renewal's
//! start and the inbox's last proof, plus the grace less the drift allowance.
//!
//! Implementation notes: a proof is the send time of a PING (or of the SUBSCRIBE) a connection
//! answered. It counts for a hold only if that connection's subscription was confirmed before the
//! hold's last renewal began: a mark a probe set while an earlier connection was away is deleted
//! by that renewal, and never by a later PING. A connection that dropped still proves what it
//! proved while it lived, so the last few connections are kept.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// How often the inbox proves itself while a hold counts on it: three times per grace, so that
/// one late or lost PING does not lose every hold. A hold younger than one such period needs no
/// proof yet (its own call proves it for a grace), so a short hold costs nothing.
const PROOFS_PER_GRACE: u32 = 3;

/// How many connections' proofs are kept: the watchdog renews every hold as soon as the inbox
/// reconnects, so a hold counts on the last one or two.
const CONNECTIONS_KEPT: usize = 4;

/// The inbox proofs of one manager, and the takeover grace its holds were made under.
#[derive(Debug)]
pub(crate) struct InboxProof {
    /// How long the inbox may be missing before a hold of this manager may be taken over, less
    /// the drift allowance: the holder's side of the grace. `None`: takeover is off.
    allowance: Option<Duration>,
    /// The grace itself (`None`: takeover is off).
    grace: Option<Duration>,
    /// The last connections' proofs, the live one (if any) last.
    proofs: Mutex<VecDeque<Proofs>>,
    /// The starts of the holds whose lost signals count on these proofs, with how many began at
    /// each: the inbox PINGs often only while one of them is older than a third of the grace.
    holds: Mutex<BTreeMap<Instant, usize>>,
}

/// What one connection has proven.
#[derive(Debug, Clone, Copy)]
struct Proofs {
    /// When the connection's subscription was confirmed.
    subscribed: Instant,
    /// The send time of the last command the connection answered.
    answered: Instant,
    /// Whether it is the live connection (a dropped one proves nothing more).
    live: bool,
}

impl InboxProof {
    /// The proofs of a manager whose holds may be taken over after `grace` (`None`: never), the
    /// holder counting `grace - drift` (`drift`: the clock-drift allowance of that grace).
    pub(crate) fn new(grace: Option<(Duration, Duration)>) -> Self {
        InboxProof {
            allowance: grace.map(|(grace, drift)| grace.saturating_sub(drift)),
            grace: grace.map(|(grace, _)| grace),
            proofs: Mutex::default(),
            holds: Mutex::default(),
        }
    }

    /// New proofs, with nothing proven yet, under the same grace: another server's inbox (each
    /// master of a quorum proves itself on its own).
    pub(crate) fn same_grace(&self) -> Self {
        InboxProof {
            allowance: self.allowance,
            grace: self.grace,
            proofs: Mutex::default(),
            holds: Mutex::default(),
        }
    }

    fn proofs(&self) -> MutexGuard<'_, VecDeque<Proofs>> {
        self.proofs.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The takeover grace (`None`: takeover is off).
    pub(crate) fn grace(&self) -> Option<Duration> {
        self.grace
    }

    /// A new connection's SUBSCRIBE, sent at `sent`, was confirmed at `confirmed`.
    pub(crate) fn subscribed(&self, sent: Instant, confirmed: Instant) {
        let mut proofs = self.proofs();
        if let Some(last) = proofs.back_mut() {
            last.live = false;
        }
        if proofs.len() == CONNECTIONS_KEPT {
            proofs.pop_front();
        }
        proofs.push_back(Proofs {
            subscribed: confirmed,
            answered: sent,
            live: true,
        });
    }

    /// The live connection answered a PING sent at `sent`.
    pub(crate) fn answered(&self, sent: Instant) {
        if let Some(live) = self.proofs().back_mut().filter(|last| last.live) {
            live.answered = live.answered.max(sent);
        }
    }

    /// The live connection dropped (or stopped answering): it proves nothing more.
    pub(crate) fn dropped(&self) {
        if let Some(last) = self.proofs().back_mut() {
            last.live = false;
        }
    }

    /// The moment a hold last made or renewed by a call begun at `renewed` may be taken over, by
    /// the holder's clock; `None` when takeover is off.
    pub(crate) fn deadline(&self, renewed: Instant) -> Option<Instant> {
        let allowance = self.allowance?;
        let counted = (self.proofs().iter())
            .filter(|proofs| proofs.subscribed < renewed)
            .map(|proofs| proofs.answered)
            .max();
        let base = counted.map_or(renewed, |proven| proven.max(renewed));
        Some(base.checked_add(allowance).unwrap_or(base))
    }

    /// Whether a hold counted from `since` (a grant's, learnt late) is to be checked by another
    /// attempt at `now` rather than taken: its deadline has passed, or comes before the inbox
    /// can prove itself again (within a third of the grace; half of it is left at the least).
    /// Taken, it would count itself lost at once. `false` while takeover is off.
    pub(crate) fn too_late(&self, since: Instant, now: Instant) -> bool {
        let (Some(deadline), Some(grace)) = (self.deadline(since), self.grace) else {
            return false;
        };
        deadline.saturating_duration_since(now) < grace / 2
    }

    /// How often the inbox must prove itself at `now`: a third of the grace once a hold that
    /// counts on it is that old; `None` while takeover is off or no hold is. Waiting requests
    /// add nothing: a grant whose proof is too old is taken up by another attempt instead.
    pub(crate) fn due_every(&self, now: Instant) -> Option<Duration> {
        let every = self.grace? / PROOFS_PER_GRACE;
        let oldest = *self.holds().keys().next()?;
        (now.saturating_duration_since(oldest) >= every).then_some(every)
    }

    fn holds(&self) -> MutexGuard<'_, BTreeMap<Instant, usize>> {
        self.holds.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A lost signal of a hold made by a call begun at `made` counts on these proofs until
    /// [`InboxProof::forgotten`].
    pub(crate) fn counted_on(&self, made: Instant) {
        *self.holds().entry(made).or_insert(0) += 1;
    }

    /// The lost signal of the hold made at `made` no longer counts on these proofs.
    pub(crate) fn forgotten(&self, made: Instant) {
        let mut holds = self.holds();
        if let Some(count) = holds.get_mut(&made) {
            *count -= 1;
            if *count == 0 {
                holds.remove(&made);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GRACE: Duration = Duration::from_secs(1);
    const DRIFT: Duration = Duration::from_millis(12);

    #[test]
    fn a_proof_counts_only_from_a_subscription_older_than_the_renewal() {
        let proof = InboxProof::new(Some((GRACE, DRIFT)));
        let t0 = Instant::now();
        let allowance = GRACE - DRIFT;
        proof.subscribed(t0, t0 + Duration::from_millis(1));
        let renewed = t0 + Duration::from_millis(10);
        proof.answered(t0 + Duration::from_millis(500));
        assert_eq!(
            proof.deadline(renewed),
            Some(t0 + Duration::from_millis(500) + allowance)
        );
        // a reconnection: its proofs wait for a renewal begun after it was confirmed, and the
        // dropped connection proves what it proved, no more
        proof.dropped();
        proof.answered(t0 + Duration::from_millis(550));
        let before = Some(t0 + Duration::from_millis(500) + allowance);
        assert_eq!(proof.deadline(renewed), before);
        proof.subscribed(
            t0 + Duration::from_millis(600),
            t0 + Duration::from_millis(601),
        );
        proof.answered(t0 + Duration::from_millis(700));
        assert_eq!(proof.deadline(renewed), before);
        let after = t0 + Duration::from_millis(650);
        assert_eq!(
            proof.deadline(after),
            Some(t0 + Duration::from_millis(700) + allowance)
        );
    }

    #[test]
    fn a_grant_too_close_to_its_deadline_is_checked_again() {
        let proof = InboxProof::new(Some((GRACE, DRIFT)));
        let t0 = Instant::now();
        let allowance = GRACE - DRIFT;
        assert!(!proof.too_late(t0, t0));
        assert!(!proof.too_late(t0, t0 + allowance - GRACE / 2));
        // a deadline a millisecond ahead: the hold would be lost before any proof came
        assert!(proof.too_late(t0, t0 + allowance - Duration::from_millis(1)));
        assert!(proof.too_late(t0, t0 + allowance));
        assert!(!InboxProof::new(None).too_late(t0, t0 + GRACE * 10));
    }

    #[test]
    fn takeover_off_has_no_deadline_and_no_pings() {
        let proof = InboxProof::new(None);
        let t0 = Instant::now();
        proof.counted_on(t0);
        assert_eq!(proof.deadline(t0), None);
        assert_eq!(proof.due_every(t0 + GRACE), None);
    }

    #[test]
    fn only_a_hold_a_third_of_the_grace_old_makes_the_inbox_prove_itself() {
        let on = InboxProof::new(Some((GRACE, DRIFT)));
        let t0 = Instant::now();
        let every = GRACE / 3;
        assert_eq!(on.due_every(t0 + GRACE), None);
        on.counted_on(t0);
        on.counted_on(t0);
        on.counted_on(t0 + GRACE);
        assert_eq!(on.due_every(t0 + every / 2), None);
        assert_eq!(on.due_every(t0 + every), Some(every));
        on.forgotten(t0);
        assert_eq!(on.due_every(t0 + every), Some(every));
        on.forgotten(t0);
        // the one left began later: it needs no proof until it is a third of the grace old
        assert_eq!(on.due_every(t0 + GRACE + every / 2), None);
        assert_eq!(on.due_every(t0 + GRACE + every), Some(every));
        on.forgotten(t0 + GRACE);
        on.forgotten(t0 + GRACE);
        assert_eq!(on.due_every(t0 + GRACE * 2), None);
    }
}
