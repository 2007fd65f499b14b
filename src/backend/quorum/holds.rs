//! The quorum holds of one manager, by (lock, owner): the re-entry count, the fencing token, and
//! what each master has of the hold. Re-entry gets its token back from here, and a release or an
//! undo drops on each master the hold it belongs to, never a later hold of the same owner.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

use crate::backend::LockParty;

/// What one master has of a hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Part {
    /// It granted the hold under this token of its own (unique per master and hold).
    Granted(u64),
    /// Its answer is still out: the attempt's settling records it when it comes.
    Pending,
    /// Its call failed: it may have taken the lock, under a token never learnt.
    Failed,
    /// It answered that someone else held the lock.
    Absent,
}

/// How one master's part of an attempt or a hold is found there: by the token that master issued
/// for it, or, when that was never learnt, by the attempt that took it afresh.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Binding {
    Token(u64),
    Attempt(u64),
}

/// What a release drops on each master (`None`: nothing known there, see [`Part`]), and whether
/// it was the owner's last hold.
#[derive(Debug)]
pub(super) struct Release {
    pub(super) last: bool,
    pub(super) on: Vec<Option<Binding>>,
    /// Masters that answered "busy" to the attempt: they hold nothing of it.
    pub(super) absent: Vec<bool>,
}

/// One acquire attempt: its id, and the size of the quorum it needs.
#[derive(Debug, Clone, Copy)]
pub(super) struct QuorumAttempt {
    pub(super) id: u64,
    pub(super) n: usize,
    pub(super) quorum: usize,
}

/// A master that granted an attempt: its index, its token, and whether the owner held the lock
/// there already (the token is then that hold's).
pub(super) type Won = (usize, u64, bool);

/// What a lost hold still has on a master that the new hold re-entered: its index, its token
/// there, and how many holds to drop (the new hold's own stays).
pub(super) type Stale = (usize, u64, u32);

/// One hold of one owner (re-entries count on it).
#[derive(Debug)]
struct QuorumHold {
    count: u32,
    /// The fencing token of the hold: the largest token of the masters that granted it.
    token: u64,
    parts: Vec<Part>,
    /// Per master, the holds of this hold it granted (its answers "won", less the releases sent
    /// to it): what a re-entering master still counts of the hold once it is lost.
    granted: Vec<u32>,
    /// The attempt that took the hold afresh (it finds the hold where a call failed).
    attempt: u64,
}

/// The quorum holds of this manager.
#[derive(Debug, Default)]
pub(super) struct QuorumHolds {
    table: Mutex<HashMap<LockParty, QuorumHold>>,
}

impl QuorumHolds {
    fn table(&self) -> MutexGuard<'_, HashMap<LockParty, QuorumHold>> {
        // Each operation leaves the table consistent before it could panic.
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(super) fn contains(&self, lock: &LockParty) -> bool {
        self.table().contains_key(lock)
    }

    /// The token master `node` issued for the owner's hold of the lock, when known.
    pub(super) fn granted_on(&self, lock: &LockParty, node: usize) -> Option<u64> {
        let table = self.table();
        match table.get(lock)?.parts.get(node)? {
            Part::Granted(token) => Some(*token),
            _ => None,
        }
    }

    /// A won attempt: `won` are the masters that granted it, `parts` what every master answered
    /// (see [`Part`]). Returns the hold's token. An owner that already holds the lock keeps its
    /// token when a majority of masters re-entered its hold (with the very token they issued for
    /// it, where known): they kept it all along, so no one else can have held a majority
    /// meanwhile. Otherwise the hold was lost, its guards with it, and this is a new one; what
    /// the lost hold still has on masters the new one re-entered is returned, to be dropped.
    pub(super) fn record(
        &self,
        lock: LockParty,
        won: &[Won],
        parts: Vec<Part>,
        attempt: QuorumAttempt,
    ) -> (u64, Vec<Stale>) {
        let fresh = new_token(won);
        let mut table = self.table();
        let hold = table.entry(lock).or_insert_with(|| QuorumHold {
            count: 0,
            token: fresh,
            parts: vec![Part::Pending; attempt.n],
            granted: vec![0; attempt.n],
            attempt: attempt.id,
        });
        let mut stale = Vec::new();
        if hold.count == 0 || continuing(hold, won) < attempt.quorum {
            // The lost hold's leftovers are dropped only when it is surely gone from a majority
            // (masters that answered without it): a master whose call failed may still keep it
            // for a guard that does not know (a fixed lease), and then they just expire.
            if hold.count > 0 && gone(hold, won, &parts) > attempt.n - attempt.quorum {
                stale = won
                    .iter()
                    .filter(|(i, token, reentered)| {
                        *reentered && hold.parts.get(*i) == Some(&Part::Granted(*token))
                    })
                    .map(|(i, token, _)| (*i, *token, hold.granted[*i]))
                    .filter(|(_, _, holds)| *holds > 0)
                    .collect();
            }
            *hold = QuorumHold {
                count: 0,
                token: fresh,
                parts,
                granted: vec![0; attempt.n],
                attempt: attempt.id,
            };
        }
        for (i, token, reentered) in won {
            if let Some(part) = hold.parts.get_mut(*i) {
                *part = Part::Granted(*token);
            }
            if let Some(granted) = hold.granted.get_mut(*i) {
                // a master that took the lock afresh lost what it had of the hold before
                *granted = if *reentered { *granted + 1 } else { 1 };
            }
        }
        hold.count += 1;
        (hold.token, stale)
    }

    /// How many of the masters in `won` kept the owner's current hold (0 when it has none).
    pub(super) fn continuing(&self, lock: &LockParty, won: &[Won]) -> usize {
        self.table()
            .get(lock)
            .filter(|hold| hold.count > 0)
            .map_or(0, |hold| continuing(hold, won))
    }

    /// A master answered the attempt of the hold under `hold_token` after the attempt was decided
    /// (`part`: what it answered). False when that hold is not the owner's any more (released,
    /// or lost and taken anew): what the master took is then the caller's to undo.
    pub(super) fn settle(
        &self,
        lock: &LockParty,
        hold_token: u64,
        node: usize,
        part: Part,
    ) -> bool {
        let mut table = self.table();
        let Some(hold) = table.get_mut(lock).filter(|hold| hold.token == hold_token) else {
            return false;
        };
        if let Some(slot) = hold.parts.get_mut(node) {
            if !matches!(slot, Part::Granted(_)) {
                *slot = part;
            }
        }
        if let (Part::Granted(_), Some(granted)) = (part, hold.granted.get_mut(node)) {
            *granted += 1;
        }
        true
    }

    /// One hold under `token` is released: what to drop on each master. `None` when the owner's
    /// hold is not that one any more (lost, and taken anew since): nothing of it is left to drop.
    /// A master whose answer is still out gets nothing while the owner keeps the hold (its
    /// settling records what it took); when the last hold goes, it is sent the drop by the
    /// attempt, right behind that attempt on the lock's connection: a late grant left there until
    /// its answer comes back would keep the lock from the next holder on that master, and then a
    /// majority without it needs a master that may be frozen. Its settling still undoes what the
    /// drop did not find.
    pub(super) fn release(&self, lock: &LockParty, token: u64) -> Option<Release> {
        let mut table = self.table();
        let hold = table.get_mut(lock).filter(|hold| hold.token == token)?;
        hold.count = hold.count.saturating_sub(1);
        let last = hold.count == 0;
        let on = hold
            .parts
            .iter()
            .map(|part| match part {
                Part::Granted(token) => Some(Binding::Token(*token)),
                Part::Failed => Some(Binding::Attempt(hold.attempt)),
                Part::Pending if last => Some(Binding::Attempt(hold.attempt)),
                Part::Pending | Part::Absent => None,
            })
            .collect();
        let absent = hold.parts.iter().map(|p| *p == Part::Absent).collect();
        for granted in &mut hold.granted {
            *granted = granted.saturating_sub(1);
        }
        if last {
            table.remove(lock);
        }
        Some(Release { last, on, absent })
    }
}

/// How many masters answered that they do not have `hold`: they took the lock afresh, re-entered
/// a hold of another token than they issued for it, or answered that someone else holds it.
fn gone(hold: &QuorumHold, won: &[Won], parts: &[Part]) -> usize {
    let replaced = won
        .iter()
        .filter(|(i, token, reentered)| {
            !reentered || matches!(hold.parts.get(*i), Some(Part::Granted(known)) if known != token)
        })
        .count();
    replaced + parts.iter().filter(|p| **p == Part::Absent).count()
}

/// The token of a hold won by `won`: the largest token a master issued afresh for it, never one
/// a master re-entered (that is an earlier hold's, maybe a lost one's, whose guards must not
/// match the new hold); the largest re-entered one only when no master took it afresh.
fn new_token(won: &[Won]) -> u64 {
    let fresh = won.iter().filter(|(_, _, reentered)| !reentered);
    fresh
        .map(|(_, token, _)| *token)
        .max()
        .or_else(|| won.iter().map(|(_, token, _)| *token).max())
        .unwrap_or(0)
}

/// The masters in `won` that re-entered `hold` under the token they issued for it (if known).
fn continuing(hold: &QuorumHold, won: &[Won]) -> usize {
    won.iter()
        .filter(|(i, token, reentered)| {
            *reentered
                && match hold.parts.get(*i) {
                    Some(Part::Granted(known)) => known == token,
                    Some(_) => true,
                    None => false,
                }
        })
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::waiters::LockId;
    use std::sync::Arc;

    fn lock() -> LockParty {
        LockParty {
            id: LockId::new("{ns:k}"),
            owner: Arc::from("m:1"),
        }
    }

    fn attempt(id: u64) -> QuorumAttempt {
        QuorumAttempt {
            id,
            n: 3,
            quorum: 2,
        }
    }

    #[test]
    fn a_reentry_keeps_its_token_while_a_majority_still_holds_it() {
        let holds = QuorumHolds::default();
        // first hold: masters 0 and 1 granted it (master 2 answered too late)
        let first = [(0, 10, false), (1, 30, false)];
        let parts = vec![Part::Granted(10), Part::Granted(30), Part::Pending];
        assert_eq!(
            holds.record(lock(), &first, parts.clone(), attempt(1)).0,
            30
        );
        // re-entry: 0 re-enters, 2 re-enters the late grant, 1 granted it afresh (it had lost it)
        let won = [(0, 10, true), (1, 99, false), (2, 20, true)];
        assert_eq!(holds.record(lock(), &won, parts.clone(), attempt(2)).0, 30);
        // a late grant recorded: its token must match from then on
        assert!(holds.settle(&lock(), 30, 2, Part::Granted(20)));
        let again = [(0, 10, true), (2, 20, true)];
        assert_eq!(
            holds.record(lock(), &again, parts.clone(), attempt(3)).0,
            30
        );
        // a master that re-entered under another token than it issued did not keep the hold
        let other = [(0, 10, true), (2, 21, true)];
        let fresh = vec![Part::Granted(10), Part::Failed, Part::Granted(21)];
        assert_eq!(holds.record(lock(), &other, fresh, attempt(4)).0, 21);
        // that hold is new: it counts from one, and the old guards' token releases nothing
        assert!(holds.release(&lock(), 30).is_none());
        let release = holds.release(&lock(), 21).expect("the new hold");
        assert!(release.last);
        assert_eq!(
            release.on,
            [
                Some(Binding::Token(10)),
                Some(Binding::Attempt(4)),
                Some(Binding::Token(21))
            ]
        );
        assert!(!holds.contains(&lock()));
    }

    #[test]
    fn a_late_answer_settles_only_into_the_hold_of_its_attempt() {
        let holds = QuorumHolds::default();
        let first = [(0, 10, false), (1, 30, false)];
        let parts = vec![Part::Granted(10), Part::Granted(30), Part::Pending];
        assert_eq!(holds.record(lock(), &first, parts, attempt(1)).0, 30);
        // released while master 2's answer is out: the drop goes there by the attempt
        let release = holds.release(&lock(), 30).expect("the hold");
        assert_eq!(release.on[2], Some(Binding::Attempt(1)));
        // the same owner takes the lock anew; the first attempt's late grant is not part of it
        let won = [(0, 40, false), (1, 45, false)];
        let parts = vec![Part::Granted(40), Part::Granted(45), Part::Absent];
        assert_eq!(holds.record(lock(), &won, parts, attempt(2)).0, 45);
        assert!(!holds.settle(&lock(), 30, 2, Part::Granted(20)));
        let release = holds.release(&lock(), 45).expect("the new hold");
        assert_eq!(
            release.on,
            [Some(Binding::Token(40)), Some(Binding::Token(45)), None]
        );
        assert_eq!(release.absent, [false, false, true]);
    }

    #[test]
    fn a_lost_hold_left_on_a_master_the_new_hold_reentered_is_dropped() {
        let holds = QuorumHolds::default();
        let first = [(0, 10, false), (1, 30, false), (2, 20, false)];
        let parts = vec![Part::Granted(10), Part::Granted(30), Part::Granted(20)];
        assert_eq!(
            holds.record(lock(), &first, parts.clone(), attempt(1)).0,
            30
        );
        let reentry = [(0, 10, true), (1, 30, true), (2, 20, true)];
        assert_eq!(holds.record(lock(), &reentry, parts, attempt(2)).0, 30);
        // masters 0 and 1 lost the hold (two guards); master 2 kept it and is re-entered
        let won = [(0, 40, false), (1, 45, false), (2, 20, true)];
        let parts = vec![Part::Granted(40), Part::Granted(45), Part::Granted(20)];
        let (token, stale) = holds.record(lock(), &won, parts, attempt(3));
        assert_eq!(token, 45);
        assert_eq!(stale, [(2, 20, 2)], "the lost hold's two holds on master 2");
    }

    #[test]
    fn a_stale_drop_counts_only_what_that_master_granted() {
        let lost_on_0_and_1 = |master_1: Part| {
            let holds = QuorumHolds::default();
            let first = [(0, 10, false), (1, 30, false), (2, 20, false)];
            let parts = vec![Part::Granted(10), Part::Granted(30), Part::Granted(20)];
            assert_eq!(
                holds.record(lock(), &first, parts.clone(), attempt(1)).0,
                30
            );
            // a re-entry reaches masters 0 and 1; master 2's call fails before it runs
            let reentry = [(0, 10, true), (1, 30, true)];
            assert_eq!(holds.record(lock(), &reentry, parts, attempt(2)).0, 30);
            // master 0 takes the lock afresh, master 2 re-enters the old hold
            let won = [(0, 50, false), (2, 20, true)];
            let parts = vec![Part::Granted(50), master_1, Part::Granted(20)];
            holds.record(lock(), &won, parts, attempt(3))
        };
        // master 1 holds it for someone else: the old hold is surely gone from a majority
        let (token, stale) = lost_on_0_and_1(Part::Absent);
        assert_eq!(token, 50, "a fresh token, never the lost hold's");
        assert_eq!(stale, [(2, 20, 1)], "master 2 granted the lost hold once");
        // master 1 failed: the old hold may live there and on master 2: nothing is dropped
        let (token, stale) = lost_on_0_and_1(Part::Failed);
        assert_eq!(token, 50);
        assert!(stale.is_empty(), "{stale:?}");
    }
}
