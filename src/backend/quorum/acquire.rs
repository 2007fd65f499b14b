//! One quorum acquisition: every master at once, decided by a majority within the lock's validity;
//! otherwise undone on every master where it may have been taken.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use futures_util::future::join_all;
use futures_util::stream::{FuturesUnordered, StreamExt};

use super::round::{drift, gather, jitter, NodeCall, Verdict};
use super::{bounded, Node, QuorumBackend, ACQUIRE, FAIR_REFUSED};
use crate::backend::redis::{fence_key, waiters_key, ScriptCall};
use crate::backend::{AcquireRequest, Attempt, HeldLock};
use crate::error::BoxError;
use crate::options::Mode;

/// One master's answer to an attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Grant {
    /// Granted under `token`; `reentered` when the owner already held it there (the token is then
    /// that hold's).
    Won { token: u64, reentered: bool },
    /// Held by someone else for at most `ttl` more.
    Busy { ttl: Option<Duration> },
}

/// Parse the acquire script's answer: `{1, token, reentered}` or `{0, pttl, 0}`.
fn grant((acquired, value, reentered): (i64, i64, i64)) -> Grant {
    if acquired == 1 {
        Grant::Won {
            token: u64::try_from(value).unwrap_or(0),
            reentered: reentered == 1,
        }
    } else {
        Grant::Busy {
            ttl: u64::try_from(value).ok().map(Duration::from_millis),
        }
    }
}

fn flag(b: bool) -> &'static str {
    if b {
        "1"
    } else {
        "0"
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX).max(1)
}

/// One hold of one owner (re-entries count on it).
#[derive(Debug)]
struct Hold {
    count: u32,
    /// The fencing token of the hold: the largest token of the masters that granted it.
    token: u64,
    /// The token each master issued for this hold (unique per master and hold).
    node_tokens: Vec<Option<u64>>,
}

/// The quorum holds of this manager. They give re-entry its token back (a re-entry may win a
/// master the first acquisition missed, which would issue a new, larger token there), and tell a
/// re-entry from a fresh acquisition when an attempt must be undone.
#[derive(Debug, Default)]
pub(super) struct Holds {
    table: Mutex<HashMap<HeldLock, Hold>>,
}

impl Holds {
    fn table(&self) -> MutexGuard<'_, HashMap<HeldLock, Hold>> {
        // Each operation leaves the table consistent before it could panic.
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn contains(&self, lock: &HeldLock) -> bool {
        self.table().contains_key(lock)
    }

    /// A won attempt: `won` are the masters that granted it, with their tokens and whether the
    /// owner held it there already. Returns the hold's token. An owner that already holds the lock
    /// keeps its token when a majority of masters re-entered its hold (with the very token they
    /// issued for it, where known): they kept it all along, so no one else can have held a
    /// majority meanwhile. Otherwise the hold was lost and this is a new one.
    fn record(&self, lock: HeldLock, won: &[(usize, u64, bool)], n: usize, quorum: usize) -> u64 {
        let fresh = won.iter().map(|(_, token, _)| *token).max().unwrap_or(0);
        let mut table = self.table();
        let hold = table.entry(lock).or_insert_with(|| Hold {
            count: 0,
            token: fresh,
            node_tokens: vec![None; n],
        });
        if hold.count == 0 || continuing(hold, won) < quorum {
            hold.token = fresh;
            hold.node_tokens = vec![None; n];
        }
        for (i, token, _) in won {
            if let Some(slot) = hold.node_tokens.get_mut(*i) {
                *slot = Some(*token);
            }
        }
        hold.count += 1;
        hold.token
    }

    /// How many of the masters in `won` kept the owner's current hold (0 when it has none).
    fn continuing(&self, lock: &HeldLock, won: &[(usize, u64, bool)]) -> usize {
        self.table()
            .get(lock)
            .filter(|hold| hold.count > 0)
            .map_or(0, |hold| continuing(hold, won))
    }

    /// A master granted a hold after its attempt was decided: remember its token.
    fn record_late(&self, lock: &HeldLock, node: usize, token: u64) {
        if let Some(slot) = self
            .table()
            .get_mut(lock)
            .and_then(|hold| hold.node_tokens.get_mut(node))
        {
            slot.get_or_insert(token);
        }
    }

    /// One hold is released. True when it was the owner's last (or unknown).
    pub(super) fn forget(&self, lock: &HeldLock) -> bool {
        let mut table = self.table();
        let Some(hold) = table.get_mut(lock) else {
            return true;
        };
        hold.count = hold.count.saturating_sub(1);
        if hold.count > 0 {
            return false;
        }
        table.remove(lock);
        true
    }
}

/// The masters in `won` that re-entered `hold` under the token they issued for it (if known).
fn continuing(hold: &Hold, won: &[(usize, u64, bool)]) -> usize {
    won.iter()
        .filter(|(i, token, reentered)| {
            *reentered
                && hold
                    .node_tokens
                    .get(*i)
                    .is_some_and(|t| t.unwrap_or(*token) == *token)
        })
        .count()
}

impl QuorumBackend {
    /// One attempt: the lock on every master at once. It counts when a majority granted it and
    /// validity = (lease + drift) − elapsed − drift > 0, where every master was asked to keep it for
    /// lease + drift: the validity left is then exactly the lease the guard counts from the start of
    /// the attempt. Otherwise it is released on every master where it may have been taken, and the
    /// lock is reported busy (after a random pause, so that contenders that split it do not retry
    /// in lockstep) — or, when fewer than a majority answered, the quorum is down: an error.
    pub(crate) async fn try_acquire(&self, req: &AcquireRequest<'_>) -> Result<Attempt, BoxError> {
        if req.mode == Mode::Fair {
            return Err(FAIR_REFUSED.into());
        }
        let n = self.nodes.len();
        let lock = HeldLock {
            id: req.id.clone(),
            owner: Arc::from(req.owner),
        };
        let reentry = self.holds.contains(&lock);
        let drift = drift(req.lease);
        let node_lease = req.lease + drift;
        let started = Instant::now();
        let calls = (0..n)
            .map(|i| self.acquire_call(i, &lock, node_lease, req.will_wait, req.others_waiting));
        let mut round = gather(calls, &self.suspects(), |g| matches!(g, Grant::Won { .. })).await;
        let mut won: Vec<(usize, u64, bool)> = round
            .answers
            .iter()
            .filter_map(|(i, answer)| match answer {
                Ok(Grant::Won { token, reentered }) => Some((*i, *token, *reentered)),
                _ => None,
            })
            .collect();
        // A re-entry keeps its token only if a majority shows the hold was kept: when the first
        // majority cannot show it (a master had not seen the first grant yet), hear the others.
        while reentry
            && round.verdict == Verdict::Yes
            && self.holds.continuing(&lock, &won) < self.quorum()
        {
            let Some((i, answer)) = round.rest.next().await else {
                break;
            };
            if let Ok(Grant::Won { token, reentered }) = &answer {
                won.push((i, *token, *reentered));
            }
            round.answers.push((i, answer));
        }
        let elapsed = started.elapsed();
        let validity = node_lease.saturating_sub(elapsed).saturating_sub(drift);
        if round.verdict == Verdict::Yes && !validity.is_zero() {
            let token = self.holds.record(lock.clone(), &won, n, self.quorum());
            self.settle_after_win(round.rest, lock);
            return Ok(Attempt::Acquired { token });
        }
        if round.verdict == Verdict::Yes {
            tracing::debug!(lock = %lock.id, ?elapsed, "quorum reached too late: lock not valid");
        }
        // Undo what was granted now, before the next attempt. A master that failed may still have
        // run the script: undoing a fresh attempt there is harmless (in the background: it is
        // likely down), undoing a re-entry there could take away the owner's earlier hold, so a
        // re-entry is only undone where it is known to have been taken.
        let (mut granted, mut unsure) = (Vec::new(), Vec::new());
        for (i, answer) in &round.answers {
            match answer {
                Ok(Grant::Won { .. }) => granted.push(self.nodes[*i].clone()),
                Err(_) if !reentry => unsure.push(self.nodes[*i].clone()),
                _ => {}
            }
        }
        self.settle_after_loss(round.rest, lock.clone(), reentry);
        if !unsure.is_empty() {
            let (lock, timeout) = (lock.clone(), self.node_timeout);
            self.finish_later(Box::pin(async move {
                join_all(unsure.into_iter().map(|node| undo_on(node, &lock, timeout))).await;
            }));
        }
        let timeout = self.node_timeout;
        join_all(
            granted
                .into_iter()
                .map(|node| undo_on(node, &lock, timeout)),
        )
        .await;
        if round.verdict == Verdict::Down {
            return Err(self.down("acquisition", &round.answers));
        }
        // Without a busy master (the round was too slow), retry after the pause; else wait for a
        // wake-up from any master, or at most until the first busy master's holder expires.
        let ttl = busy_ttl(&round.answers);
        if req.will_wait {
            let spread = (elapsed * 2 + Duration::from_millis(1)).min(self.node_timeout);
            tokio::time::sleep(jitter(spread)).await;
        }
        Ok(Attempt::Busy { ttl })
    }

    fn acquire_call(
        &self,
        i: usize,
        lock: &HeldLock,
        lease: Duration,
        will_wait: bool,
        others_waiting: bool,
    ) -> NodeCall<Grant> {
        let (redis, up) = (self.nodes[i].redis.clone(), self.nodes[i].up.clone());
        let (lock, manager, timeout) = (lock.clone(), self.manager_id.clone(), self.node_timeout);
        Box::pin(async move {
            let mut call = ScriptCall::new(&ACQUIRE, 3);
            call.key(&*lock.id)
                .key(waiters_key(&lock.id))
                .key(fence_key(&lock.id))
                .arg(&*lock.owner)
                .arg(millis(lease))
                .arg(&*manager)
                .arg(flag(will_wait))
                .arg(flag(others_waiting));
            let call = redis.run_script::<(i64, i64, i64)>(&lock.id, &call);
            let answer = bounded(timeout, &up, call).await;
            (i, answer.map(grant))
        })
    }

    /// The masters still answering after a win: a grant that arrives once the owner let go of the
    /// lock is released at once; otherwise it is part of the hold (renewed and released with it).
    fn settle_after_win(&self, mut rest: FuturesUnordered<NodeCall<Grant>>, lock: HeldLock) {
        if rest.is_empty() {
            return;
        }
        let holds = self.holds.clone();
        let (nodes, timeout) = (self.nodes.clone(), self.node_timeout);
        self.finish_later(Box::pin(async move {
            while let Some((i, answer)) = rest.next().await {
                if let Ok(Grant::Won { token, .. }) = answer {
                    if holds.contains(&lock) {
                        holds.record_late(&lock, i, token);
                    } else {
                        undo_on(nodes[i].clone(), &lock, timeout).await;
                    }
                }
            }
        }));
    }

    /// The masters still answering after a failed attempt: undo what they grant (and, for a fresh
    /// attempt, what they may have granted before failing).
    fn settle_after_loss(
        &self,
        mut rest: FuturesUnordered<NodeCall<Grant>>,
        lock: HeldLock,
        reentry: bool,
    ) {
        if rest.is_empty() {
            return;
        }
        let (nodes, timeout) = (self.nodes.clone(), self.node_timeout);
        self.finish_later(Box::pin(async move {
            while let Some((i, answer)) = rest.next().await {
                let taken = match answer {
                    Ok(Grant::Won { .. }) => true,
                    Ok(Grant::Busy { .. }) => false,
                    Err(_) => !reentry,
                };
                if taken {
                    undo_on(nodes[i].clone(), &lock, timeout).await;
                }
            }
        }));
    }
}

/// How long until the first busy master's holder expires (`None`: unknown); 1 ms when no master
/// was busy.
fn busy_ttl(answers: &[(usize, Result<Grant, BoxError>)]) -> Option<Duration> {
    let mut busy = answers.iter().filter_map(|(_, answer)| match answer {
        Ok(Grant::Busy { ttl }) => Some(*ttl),
        _ => None,
    });
    match busy.next() {
        None => Some(Duration::from_millis(1)),
        Some(first) => busy.fold(first, |a, b| match (a, b) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }),
    }
}

/// Release an attempt's hold on one master, telling the next waiting manager there (this one
/// included: one of its requests may have been kept out by this very attempt).
async fn undo_on(node: Node, lock: &HeldLock, timeout: Duration) {
    // the master's own token is not kept here: release by owner
    let release = node.redis.release(&lock.id, &lock.owner, None);
    if let Err(err) = bounded(timeout, &node.up, release).await {
        tracing::debug!(error = %err, lock = %lock.id, "could not undo a quorum attempt on a master; it expires");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lock() -> HeldLock {
        HeldLock {
            id: Arc::from("{ns:k}"),
            owner: Arc::from("m:1"),
        }
    }

    #[test]
    fn a_reentry_keeps_its_token_while_a_majority_still_holds_it() {
        let holds = Holds::default();
        // first hold: masters 0 and 1 granted it (master 2 answered too late)
        assert_eq!(
            holds.record(lock(), &[(0, 10, false), (1, 30, false)], 3, 2),
            30
        );
        // re-entry: 0 re-enters, 2 re-enters the late grant, 1 granted it afresh (it had lost it)
        let won = [(0, 10, true), (1, 99, false), (2, 20, true)];
        assert_eq!(holds.record(lock(), &won, 3, 2), 30);
        // a late grant was recorded: its token must match from then on
        holds.record_late(&lock(), 2, 20);
        assert_eq!(
            holds.record(lock(), &[(0, 10, true), (2, 20, true)], 3, 2),
            30
        );
        // a master that re-entered under another token than it issued did not keep the hold
        assert_eq!(
            holds.record(lock(), &[(0, 10, true), (2, 21, true)], 3, 2),
            21
        );
        for _ in 0..3 {
            assert!(!holds.forget(&lock()));
        }
        assert!(holds.forget(&lock()));
        assert!(!holds.contains(&lock()));
    }

    #[test]
    fn a_hold_lost_and_taken_again_gets_a_new_token() {
        let holds = Holds::default();
        assert_eq!(
            holds.record(
                lock(),
                &[(0, 10, false), (1, 30, false), (2, 20, false)],
                3,
                2
            ),
            30
        );
        // the lease was lost on a majority; the same owner takes it again: new tokens there
        let won = [(0, 40, false), (1, 45, false), (2, 20, true)];
        assert_eq!(holds.record(lock(), &won, 3, 2), 45);
    }
}
