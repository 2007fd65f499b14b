//! The quorum's takeover rule, checked on its own: a holder's `lost()` fires before a waiter can
//! hold a majority of the masters, whatever the masters' inboxes, probes and renewals do.
//!
//! Each master runs the one-server protocol of `takeover.rs` on its part of the hold: a probe
//! marks the part when the holder's inbox there is missing, and ends it a grace later, unless a
//! probe found the inbox back or a renewal deleted the mark. The holder keeps one deadline per
//! master that granted the hold (`src/quorum_proof.rs`), counted from that master's last renewal
//! and counted proofs, and is lost once fewer than a majority of them are ahead.
//!
//! Implementation notes: one clock (no drift: a deadline and a takeover may fall on the same
//! tick, and the holder's comes first); a tick is far longer than a call. The holder is A, the
//! waiter B; A holds on every master, or on two of three (the third answered too late and B
//! may take it at once). A's `lost()` is latched: no later proof revives a hold.

use stateright::{Checker, HasDiscoveries, Model, Property};

use crate::state::Time;

/// Masters of the quorum.
const MASTERS: usize = 3;
/// A majority of them.
const MAJORITY: usize = MASTERS / 2 + 1;
/// The takeover grace, in ticks.
const GRACE: Time = 2;
/// The clock stops here.
const MAX_TIME: Time = 5;

const EXCLUSION: &str = "a waiter holds a majority only once the holder is lost";
/// Reached in some state: the check is not vacuous.
const TAKEN_OVER: &str = "a waiter takes the lock over";

/// Who holds one master's part of the lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Who {
    Holder,
    Waiter,
}

/// One master, and what the holder knows of its part there.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Master {
    part: Option<Who>,
    /// When a probe first saw the holder's inbox here missing.
    mark: Option<Time>,
    /// The holder's inbox here is subscribed.
    subscribed: bool,
    /// The holder's proofs here count: the subscription is older than its last renewal.
    counts: bool,
    /// The holder's deadline here counts from this (its last renewal or counted proof), or it
    /// knows its part here is gone (`None`), or the master never granted it.
    base: Option<Time>,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct QuorumState {
    now: Time,
    masters: [Master; MASTERS],
    /// Ghost: the holder's `lost()` fired.
    lost: bool,
}

impl QuorumState {
    /// How many masters' parts the waiter holds.
    fn waiters_parts(&self) -> usize {
        let parts = self.masters.iter().filter(|m| m.part == Some(Who::Waiter));
        parts.count()
    }
}

/// What may happen in one step.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Step {
    Tick,
    /// The server closes the holder's inbox on a master (`CLIENT KILL`, a restart).
    Cut(usize),
    Subscribe(usize),
    Ping(usize),
    Renew(usize),
    /// The waiter probes a master (takeover.lua).
    Probe(usize),
    /// The waiter takes a free master's part.
    Take(usize),
}

/// The seeded defects the checker must find.
#[derive(Clone, Copy, Debug, Default)]
struct Defects {
    /// The holder counts its hold alive while any one master's deadline is ahead.
    any_one_master: bool,
    /// A probe ends a part the first time it finds the holder's inbox missing.
    takeover_on_one_miss: bool,
    /// A resubscribed inbox's proofs count before a renewal deleted the marks made meanwhile.
    proofs_before_renewal: bool,
}

#[derive(Clone, Debug)]
struct QuorumModel {
    defects: Defects,
}

impl QuorumModel {
    /// Whether the holder's hold is lost at `s.now`: fewer than a majority of its masters (any
    /// one, with the defect) have their deadline ahead.
    fn lost_now(&self, s: &QuorumState) -> bool {
        let ahead = (s.masters.iter())
            .filter(|m| m.base.is_some_and(|base| base + GRACE > s.now))
            .count();
        let needed = if self.defects.any_one_master {
            1
        } else {
            MAJORITY
        };
        ahead < needed
    }

    fn step(&self, s: &mut QuorumState, step: Step) {
        let now = s.now;
        match step {
            Step::Tick => s.now += 1,
            Step::Cut(i) => s.masters[i].subscribed = false,
            Step::Subscribe(i) => {
                let counts = self.defects.proofs_before_renewal;
                (s.masters[i].subscribed, s.masters[i].counts) = (true, counts);
            }
            Step::Ping(i) => {
                let m = &mut s.masters[i];
                if m.counts && m.subscribed {
                    m.base = m.base.map(|base| base.max(now));
                }
            }
            Step::Renew(i) => {
                let m = &mut s.masters[i];
                if m.part == Some(Who::Holder) {
                    (m.mark, m.counts) = (None, m.subscribed);
                    m.base = m.base.map(|base| base.max(now));
                } else {
                    m.base = None;
                }
            }
            Step::Probe(i) => self.probe(&mut s.masters[i], now),
            Step::Take(i) => s.masters[i].part = Some(Who::Waiter),
        }
    }

    fn probe(&self, m: &mut Master, now: Time) {
        if m.part != Some(Who::Holder) {
            return;
        }
        if m.subscribed {
            m.mark = None;
            return;
        }
        match m.mark {
            Some(since) if now - since >= GRACE => (m.part, m.mark) = (None, None),
            Some(_) => {}
            None if self.defects.takeover_on_one_miss => m.part = None,
            None => m.mark = Some(now),
        }
    }
}

impl Model for QuorumModel {
    type State = QuorumState;
    type Action = Step;

    fn init_states(&self) -> Vec<QuorumState> {
        let granted = |yes: bool| Master {
            part: yes.then_some(Who::Holder),
            mark: None,
            subscribed: true,
            counts: true,
            base: yes.then_some(0),
        };
        let all = [granted(true), granted(true), granted(true)];
        let two = [granted(true), granted(true), granted(false)];
        ([all, two].into_iter())
            .map(|masters| QuorumState {
                now: 0,
                masters,
                lost: false,
            })
            .collect()
    }

    fn actions(&self, s: &QuorumState, actions: &mut Vec<Step>) {
        if s.now < MAX_TIME {
            actions.push(Step::Tick);
        }
        for (i, m) in s.masters.iter().enumerate() {
            match m.subscribed {
                true => actions.push(Step::Cut(i)),
                false => actions.push(Step::Subscribe(i)),
            }
            if !s.lost && m.base.is_some() {
                actions.extend([Step::Ping(i), Step::Renew(i)]);
            }
            match m.part {
                Some(Who::Holder) => actions.push(Step::Probe(i)),
                None => actions.push(Step::Take(i)),
                Some(Who::Waiter) => {}
            }
        }
    }

    fn next_state(&self, s: &QuorumState, step: Step) -> Option<QuorumState> {
        let mut next = s.clone();
        self.step(&mut next, step);
        next.lost = next.lost || self.lost_now(&next);
        Some(next)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always(EXCLUSION, |_, s: &QuorumState| {
                s.waiters_parts() < MAJORITY || s.lost
            }),
            Property::sometimes(TAKEN_OVER, |_, s: &QuorumState| {
                s.waiters_parts() >= MAJORITY
            }),
        ]
    }
}

/// Explores every state of `defects`' model (the clock bounds them); the path that breaks
/// exclusion, if any. A takeover is reached in every run: the check is not vacuous.
fn explore(defects: Defects) -> Option<String> {
    let checker = QuorumModel { defects }
        .checker()
        .finish_when(HasDiscoveries::AnyOf([EXCLUSION].into()))
        .threads(2)
        .spawn_bfs()
        .join();
    println!(
        "quorum takeover {defects:?}: {} states ({} unique)",
        checker.state_count(),
        checker.unique_state_count()
    );
    assert!(
        checker.discovery(TAKEN_OVER).is_some(),
        "no takeover reached"
    );
    checker.discovery(EXCLUSION).map(|path| format!("{path}"))
}

#[test]
fn the_quorum_takeover_keeps_exclusion() {
    let broken = explore(Defects::default());
    assert!(broken.is_none(), "exclusion broken: {broken:?}");
}

#[test]
fn a_holder_kept_alive_by_one_master_is_found() {
    let defects = Defects {
        any_one_master: true,
        ..Defects::default()
    };
    let path = explore(defects).expect("the defect is found");
    println!("{path}");
}

#[test]
fn a_quorum_takeover_on_one_missed_probe_is_found() {
    let defects = Defects {
        takeover_on_one_miss: true,
        ..Defects::default()
    };
    let path = explore(defects).expect("the defect is found");
    println!("{path}");
}

#[test]
fn counting_a_resubscribed_inbox_before_a_renewal_is_found() {
    let defects = Defects {
        proofs_before_renewal: true,
        ..Defects::default()
    };
    let path = explore(defects).expect("the defect is found");
    println!("{path}");
}
