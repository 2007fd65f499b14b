//! One round of calls to every master: sent in parallel, counted as the answers arrive, and decided
//! as soon as the outcome can no longer change. The calls still in flight then are handed back, to
//! be finished in the background (never dropped: a dropped call could leave a lock behind).

use futures_util::future::BoxFuture;
use futures_util::stream::{FuturesUnordered, StreamExt};

use crate::error::BoxError;

/// One master's call in a round: its index and its answer.
pub(super) type NodeCall<T> = BoxFuture<'static, (usize, Result<T, BoxError>)>;

/// How a round ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Verdict {
    /// A majority said yes (acquired, released, ...).
    Yes,
    /// A majority answered, but too few said yes: the lock is busy (or was not held).
    No,
    /// Too few masters answered at all: the quorum is down.
    Down,
}

/// The answers of one round so far.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(super) struct Count {
    pub(super) yes: usize,
    pub(super) no: usize,
    pub(super) failed: usize,
}

/// The size of a majority of `n` masters.
pub(super) fn majority(n: usize) -> usize {
    n / 2 + 1
}

impl Count {
    /// The verdict, once the answers still pending cannot change it.
    ///
    /// "Down" wins over "busy" only when fewer than a majority answered: then nothing can be decided
    /// (the masters that did not answer might hold the lock, or might be free). When a majority
    /// answered and too few said yes, the lock is busy: held elsewhere, or split between contenders.
    pub(super) fn verdict(&self, n: usize) -> Option<Verdict> {
        let q = majority(n);
        let pending = n.saturating_sub(self.yes + self.no + self.failed);
        if self.yes >= q {
            return Some(Verdict::Yes);
        }
        if self.yes + pending >= q {
            return None;
        }
        let answered = self.yes + self.no;
        if answered >= q {
            Some(Verdict::No)
        } else if answered + pending < q {
            Some(Verdict::Down)
        } else {
            None
        }
    }

    /// The verdict if `suspects` of the masters still pending (those that failed last time) fail.
    fn verdict_without(&self, n: usize, suspects: usize) -> Option<Verdict> {
        Count {
            failed: self.failed + suspects,
            ..*self
        }
        .verdict(n)
    }

    /// The verdict to act on: the certain one, or one the masters that answered can already give
    /// without the suspects (masters that failed their last call): a dead master is not waited for,
    /// round after round, while an attempt holds what the others granted. Only "down" waits for the
    /// suspects, since they may be back.
    pub(super) fn decide(&self, n: usize, suspects: usize) -> Option<Verdict> {
        match (self.verdict(n), self.verdict_without(n, suspects)) {
            (Some(verdict), _) => Some(verdict),
            (None, Some(verdict)) if verdict != Verdict::Down => Some(verdict),
            _ => None,
        }
    }
}

/// The outcome of a round: the answers that decided it, and the calls still in flight.
pub(super) struct Round<T> {
    pub(super) answers: Vec<(usize, Result<T, BoxError>)>,
    pub(super) rest: FuturesUnordered<NodeCall<T>>,
    pub(super) verdict: Verdict,
}

/// Send every call at once and collect answers until the verdict is decided (see
/// [`Count::decide`]; `suspect` flags the masters that failed their last call). `yes` says which
/// answers count for the verdict.
pub(super) async fn gather<T>(
    calls: impl IntoIterator<Item = NodeCall<T>>,
    suspect: &[bool],
    yes: impl Fn(&T) -> bool,
) -> Round<T> {
    let n = suspect.len();
    let mut rest: FuturesUnordered<NodeCall<T>> = calls.into_iter().collect();
    let mut answers = Vec::with_capacity(n);
    let mut count = Count::default();
    let mut outstanding = vec![true; n];
    let started = tokio::time::Instant::now();
    let verdict = loop {
        let suspects = (0..n).filter(|i| outstanding[*i] && suspect[*i]).count();
        if let Some(verdict) = count.decide(n, suspects) {
            break verdict;
        }
        let Some((node, answer)) = rest.next().await else {
            // Every call answered: `verdict` is always decided then; this is only a safe default.
            break Verdict::Down;
        };
        if let Some(flag) = outstanding.get_mut(node) {
            *flag = false;
        }
        match &answer {
            Ok(value) if yes(value) => count.yes += 1,
            Ok(_) => count.no += 1,
            Err(_) => count.failed += 1,
        }
        answers.push((node, answer));
    };
    // Healthy masters answer at about the same time: give the others half the round so far, so
    // that the common case leaves nothing to finish in the background (suspects get no grace).
    let grace = started + started.elapsed() / 2;
    while (0..n).any(|i| outstanding[i] && !suspect[i]) {
        let Ok(Some((node, answer))) = tokio::time::timeout_at(grace, rest.next()).await else {
            break;
        };
        if let Some(flag) = outstanding.get_mut(node) {
            *flag = false;
        }
        answers.push((node, answer));
    }
    Round {
        answers,
        rest,
        verdict,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn count(yes: usize, no: usize, failed: usize) -> Count {
        Count { yes, no, failed }
    }

    #[test]
    fn a_majority_of_yes_decides_at_once() {
        assert_eq!(count(2, 0, 0).verdict(3), Some(Verdict::Yes));
        assert_eq!(count(3, 0, 0).verdict(5), Some(Verdict::Yes));
        assert_eq!(count(1, 0, 0).verdict(3), None);
        assert_eq!(count(2, 1, 1).verdict(5), None, "one pending can still win");
    }

    #[test]
    fn busy_needs_a_majority_of_answers_else_the_quorum_is_down() {
        // two masters answered "busy": held elsewhere, whatever the third says
        assert_eq!(count(0, 2, 0).verdict(3), Some(Verdict::No));
        // split: one each way, one down — a majority answered
        assert_eq!(count(1, 1, 1).verdict(3), Some(Verdict::No));
        // one busy, two down: nobody can tell who holds it
        assert_eq!(count(0, 1, 2).verdict(3), Some(Verdict::Down));
        assert_eq!(count(1, 0, 2).verdict(3), Some(Verdict::Down));
        // one busy, one down, one pending: the pending one decides busy vs down
        assert_eq!(count(0, 1, 1).verdict(3), None);
        assert_eq!(count(0, 0, 3).verdict(5), Some(Verdict::Down));
        assert_eq!(count(0, 3, 2).verdict(5), Some(Verdict::No));
        assert_eq!(count(2, 0, 3).verdict(5), Some(Verdict::Down));
    }

    #[test]
    fn suspects_are_not_waited_for_unless_the_quorum_looks_down() {
        // 5 masters, 2 dead since the last call: the 3 others decide
        assert_eq!(count(3, 0, 0).decide(5, 2), Some(Verdict::Yes));
        assert_eq!(count(2, 1, 0).decide(5, 2), Some(Verdict::No));
        assert_eq!(
            count(2, 1, 0).verdict(5),
            None,
            "without suspicion it would wait"
        );
        // only the suspects could make a majority answer: wait for them (they may be back)
        assert_eq!(count(1, 0, 0).decide(3, 2), None);
        assert_eq!(count(1, 0, 2).decide(3, 0), Some(Verdict::Down));
        // a live master still pending is always waited for
        assert_eq!(count(2, 0, 0).decide(5, 1), None);
    }

    #[test]
    fn every_complete_round_has_a_verdict() {
        for n in 3..=7 {
            for yes in 0..=n {
                for no in 0..=n - yes {
                    let c = count(yes, no, n - yes - no);
                    assert!(c.verdict(n).is_some(), "{c:?} of {n}");
                }
            }
        }
    }
}
