//! Proof that a manager's inbox channel of one cluster slot is subscribed: what the holds of that
//! slot count their takeover deadline from (see `inbox_proof.rs`).
//!
//! On a cluster, each slot has its own channel of the manager, subscribed on the connection to
//! the slot's master, and redis-rs resubscribes those connections on its own. A PING of a node
//! proves its connection, not that a given channel is still subscribed there. So a slot's inbox
//! proves itself by echo: it publishes to its own channel, and the message coming back through the
//! subscription proves the channel was subscribed once the message was sent.
//!
//! Implementation notes: every confirmation of a channel (the first, or redis-rs's
//! resubscription) starts a new connection's record in the slot's [`InboxProof`], and the
//! connection's drop or the slot's move away (`SUNSUBSCRIBE` pushes) ends the record's proofs.
//! The first record of a slot counts for every hold of that slot, though the holds' calls are
//! timed from before the subscription: every such call runs after it was confirmed (a request
//! subscribes the slot before its first attempt there), so no probe can have found one of them
//! missing before it. A later record counts only for holds renewed after it was confirmed.
//! An echo counts for the live record, and pushes of one connection come in order: an echo that
//! came back over a resubscription comes after that resubscription's confirmation, so it proves
//! nothing for holds renewed before it.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

use futures_util::future::join_all;

use super::cluster_inbox::ClusterInbox;
use crate::inbox_proof::InboxProof;

/// What an echo's payload starts with: no lock name (`{…}`) or grant (`g|…`) does.
const ECHO: &str = "p|";

/// The inbox proofs of one manager on a cluster, by slot, and the echoes in flight.
#[derive(Debug)]
pub(crate) struct SlotProofs {
    /// Gives each slot's proofs their grace (`None`: takeover is off, nothing is proven).
    template: Arc<InboxProof>,
    slots: Mutex<HashMap<u16, Arc<InboxProof>>>,
    /// The slots confirmed once: a later confirmation is a resubscription.
    confirmed: Mutex<HashSet<u16>>,
    /// When these proofs began: before any hold of the manager.
    began: Instant,
    /// Echoes sent and not yet back: their slot and send time, by number.
    echoes: Mutex<HashMap<u64, (u16, Instant)>>,
    next: AtomicU64,
}

impl SlotProofs {
    /// The proofs of a manager whose holds are taken over under `template`'s grace.
    pub(crate) fn new(template: Arc<InboxProof>) -> Self {
        SlotProofs {
            template,
            slots: Mutex::default(),
            confirmed: Mutex::default(),
            began: Instant::now(),
            echoes: Mutex::default(),
            next: AtomicU64::new(0),
        }
    }

    fn slots(&self) -> MutexGuard<'_, HashMap<u16, Arc<InboxProof>>> {
        self.slots.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn echoes(&self) -> MutexGuard<'_, HashMap<u64, (u16, Instant)>> {
        self.echoes.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether holds may be taken over (the manager has a grace).
    pub(crate) fn on(&self) -> bool {
        self.template.grace().is_some()
    }

    /// The proofs the holds of `slot` count on.
    pub(crate) fn of(&self, slot: u16) -> Arc<InboxProof> {
        let mut slots = self.slots();
        let proof = slots.entry(slot);
        proof
            .or_insert_with(|| Arc::new(self.template.same_grace()))
            .clone()
    }

    /// The channel of `slot` was confirmed (subscribed, or subscribed again).
    pub(crate) fn confirmed(&self, slot: u16) {
        let first = (self.confirmed.lock()).is_ok_and(|mut confirmed| confirmed.insert(slot));
        let since = if first { self.began } else { Instant::now() };
        self.of(slot).subscribed(since, since);
    }

    /// The channel of `slot` was dropped (`None`: a node's connection dropped, and with it the
    /// channels of every slot it served, which are not told apart).
    pub(crate) fn dropped(&self, slot: Option<u16>) {
        match slot {
            Some(slot) => self.of(slot).dropped(),
            None => self.slots().values().for_each(|proof| proof.dropped()),
        }
    }

    /// Take a message of the inbox: `true` when it was an echo (counted, or too late to).
    pub(crate) fn echoed(&self, payload: &str) -> bool {
        let Some(number) = payload.strip_prefix(ECHO) else {
            return false;
        };
        let echo = number.parse().ok().and_then(|n| self.echoes().remove(&n));
        if let Some((slot, sent)) = echo {
            self.of(slot).answered(sent);
        }
        true
    }

    /// The slots whose holds need a proof now.
    fn due(&self, now: Instant) -> Vec<u16> {
        let slots = self.slots();
        let due = slots
            .iter()
            .filter(|(_, proof)| proof.due_every(now).is_some());
        due.map(|(slot, _)| *slot).collect()
    }

    /// A new echo for `slot`, sent now: its payload.
    fn send(&self, slot: u16) -> String {
        let number = self.next.fetch_add(1, Ordering::Relaxed);
        self.echoes().insert(number, (slot, Instant::now()));
        format!("{ECHO}{number}")
    }

    /// Forget echoes older than `age`: they are lost, and later ones prove more.
    fn expire(&self, age: Duration) {
        let now = Instant::now();
        self.echoes()
            .retain(|_, (_, sent)| now.saturating_duration_since(*sent) < age);
    }
}

/// Prove the inbox of every slot with holds that need it, by echo, while the inbox lives: each
/// such slot three times per grace (see [`InboxProof::due_every`]). Nothing while no hold does.
pub(super) async fn prove_slots(inbox: Weak<ClusterInbox>, proofs: Arc<SlotProofs>) {
    let Some(grace) = proofs.template.grace() else {
        return;
    };
    // a hold needs its first proof within a third of the grace of its start (`due_every`)
    let every = grace / 3;
    loop {
        let due = proofs.due(Instant::now());
        {
            let Some(inbox) = inbox.upgrade() else {
                return;
            };
            if !inbox.is_open() {
                return;
            }
            proofs.expire(grace);
            let echoes = due.into_iter().map(|slot| {
                let payload = proofs.send(slot);
                inbox.publish_to_self(slot, payload)
            });
            join_all(echoes).await;
        }
        tokio::time::sleep(every).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GRACE: Duration = Duration::from_secs(1);
    const DRIFT: Duration = Duration::from_millis(12);

    fn proofs() -> SlotProofs {
        SlotProofs::new(Arc::new(InboxProof::new(Some((GRACE, DRIFT)))))
    }

    /// Send an echo for `slot` and have it come back.
    fn echo(proofs: &SlotProofs, slot: u16) -> Instant {
        let payload = proofs.send(slot);
        let sent = proofs.echoes()[&(proofs.next.load(Ordering::Relaxed) - 1)].1;
        assert!(proofs.echoed(&payload));
        sent
    }

    #[test]
    fn the_first_subscription_of_a_slot_counts_for_holds_timed_before_it() {
        let proofs = proofs();
        let made = Instant::now();
        proofs.confirmed(7);
        let sent = echo(&proofs, 7);
        let deadline = proofs.of(7).deadline(made).expect("takeover is on");
        assert_eq!(deadline, sent + (GRACE - DRIFT));
        // another slot's echo proves nothing here
        assert_eq!(proofs.of(8).deadline(made), Some(made + (GRACE - DRIFT)));
    }

    #[test]
    fn a_resubscription_counts_only_for_holds_renewed_after_it() {
        let proofs = proofs();
        let renewed = Instant::now();
        proofs.confirmed(7);
        let before = echo(&proofs, 7);
        proofs.dropped(None);
        // the dropped connection proves no more, and neither does the new one for this hold
        echo(&proofs, 7);
        proofs.confirmed(7);
        echo(&proofs, 7);
        let kept = before + (GRACE - DRIFT);
        assert_eq!(proofs.of(7).deadline(renewed), Some(kept));
        let renewed_since = Instant::now();
        let after = echo(&proofs, 7);
        assert_eq!(
            proofs.of(7).deadline(renewed_since),
            Some(after + (GRACE - DRIFT))
        );
    }

    #[test]
    fn other_messages_are_not_echoes() {
        let proofs = proofs();
        assert!(!proofs.echoed("{tower-lock:k}"));
        assert!(!proofs.echoed("g|{tower-lock:k}|w|1"));
        assert!(
            proofs.echoed("p|999"),
            "a late echo is taken, and counts for nothing"
        );
    }
}
