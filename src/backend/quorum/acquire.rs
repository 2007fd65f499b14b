//! One quorum acquisition: every master at once, decided by a majority within the lock's validity;
//! otherwise undone on every master where it may have been taken.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use futures_util::future::join_all;
use futures_util::stream::{FuturesUnordered, StreamExt};

use super::holds::{Binding, Part, QuorumAttempt, Stale};
use super::round::{gather, NodeCall, Round, Verdict};
use super::{bounded, Node, QuorumBackend, ACQUIRE, QUEUED_REFUSED, RELEASE};
use crate::backend::drift;
use crate::backend::jitter;
use crate::backend::redis::{fence_key, flag, millis, waiters_key, ScriptCall};
use crate::backend::{AcquireRequest, Attempt, LockParty};
use crate::error::BoxError;

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

impl QuorumBackend {
    /// One attempt: the lock on every master at once. It counts when a majority granted it and
    /// validity = (lease + drift) − elapsed − drift > 0, where every master was asked to keep it for
    /// lease + drift: the validity left is then exactly the lease the guard counts from the start of
    /// the attempt. Otherwise it is released on every master where it may have been taken, and the
    /// lock is reported busy (after a random pause, so that contenders that split it do not retry
    /// in lockstep) — or, when fewer than a majority answered, the quorum is down: an error.
    pub(crate) async fn try_acquire(&self, req: &AcquireRequest<'_>) -> Result<Attempt, BoxError> {
        if req.mode.is_queued() {
            return Err(QUEUED_REFUSED.into());
        }
        let n = self.nodes.len();
        let lock = LockParty {
            id: req.id.clone(),
            owner: req.owner.as_arc().clone(),
        };
        let reentry = self.holds.contains(&lock);
        let attempt = QuorumAttempt {
            id: self.attempts.fetch_add(1, Ordering::Relaxed),
            n,
            quorum: self.quorum(),
        };
        let drift = drift(req.lease);
        let node_lease = req.lease.saturating_add(drift);
        let started = Instant::now();
        let calls = (0..n).map(|i| self.acquire_call(i, &lock, node_lease, req, attempt.id));
        let mut round = gather(calls, &self.suspects(), |g| matches!(g, Grant::Won { .. })).await;
        let won = self.hear_reentry(&lock, reentry, &mut round).await;
        let elapsed = started.elapsed();
        let validity = node_lease.saturating_sub(elapsed).saturating_sub(drift);
        if round.verdict == Verdict::Yes && !validity.is_zero() {
            let token = self.keep(lock, round, &won, (attempt, started), reentry);
            return Ok(Attempt::Acquired { token });
        }
        if round.verdict == Verdict::Yes {
            tracing::debug!(lock = %lock.id, ?elapsed, "quorum reached too late: lock not valid");
        }
        let Round {
            answers,
            rest,
            verdict,
        } = round;
        self.undo_attempt(&lock, &answers, rest, attempt, reentry)
            .await;
        if verdict == Verdict::Down {
            return Err(self.down("acquisition", &answers));
        }
        // Without a busy master (the round was too slow), retry after the pause; else wait for a
        // wake-up from any master, or at most until the first busy master's holder expires.
        let ttl = busy_ttl(&answers);
        if req.will_wait {
            let spread = (elapsed * 2 + Duration::from_millis(1)).min(self.node_timeout);
            tokio::time::sleep(jitter(spread)).await;
        }
        Ok(Attempt::Busy { ttl })
    }

    /// The masters that granted the attempt, as `(master, token, reentered)`. A re-entry keeps its
    /// token only if a majority shows the hold was kept: when the first majority cannot show it (a
    /// master had not seen the first grant yet), the others are heard too.
    async fn hear_reentry(
        &self,
        lock: &LockParty,
        reentry: bool,
        round: &mut Round<Grant>,
    ) -> Vec<(usize, u64, bool)> {
        let mut won: Vec<(usize, u64, bool)> = (round.answers.iter())
            .filter_map(|(i, answer)| match answer {
                Ok(Grant::Won { token, reentered }) => Some((*i, *token, *reentered)),
                _ => None,
            })
            .collect();
        while reentry
            && round.verdict == Verdict::Yes
            && self.holds.continuing(lock, &won) < self.quorum()
        {
            let Some((i, answer)) = round.rest.next().await else {
                break;
            };
            if let Ok(Grant::Won { token, reentered }) = &answer {
                won.push((i, *token, *reentered));
            }
            round.answers.push((i, answer));
        }
        won
    }

    /// The attempt (begun at `started`) won: record the hold, drop what a lost hold left behind,
    /// and settle the masters still answering. Returns the hold's fencing token.
    fn keep(
        &self,
        lock: LockParty,
        round: Round<Grant>,
        won: &[(usize, u64, bool)],
        (attempt, started): (QuorumAttempt, Instant),
        reentry: bool,
    ) -> u64 {
        let parts = parts(attempt.n, &round.answers);
        let (token, stale) = self.holds.record(lock.clone(), won, parts, attempt);
        self.watches.made(&lock, token, started, won);
        if !stale.is_empty() {
            let undo = self.undo(lock.clone());
            self.finish_later(async move { undo.drop_stale(stale).await });
        }
        let fresh = (!reentry).then_some(attempt.id);
        self.settle_after_win(round.rest, lock, (token, started), fresh);
        token
    }

    /// The attempt lost: undo what was granted now, before the next attempt, each by the token its
    /// master issued. A master that failed may still have run the script: a fresh take there is
    /// undone by this attempt's id (in the background: the master is likely down); a re-entry
    /// there is left alone (it would be told from the owner's earlier hold by nothing).
    async fn undo_attempt(
        &self,
        lock: &LockParty,
        answers: &[(usize, Result<Grant, BoxError>)],
        rest: FuturesUnordered<NodeCall<Grant>>,
        attempt: QuorumAttempt,
        reentry: bool,
    ) {
        let (mut granted, mut unsure) = (Vec::new(), Vec::new());
        for (i, answer) in answers {
            match answer {
                Ok(Grant::Won { token, .. }) => {
                    granted.push((self.nodes[*i].clone(), Binding::Token(*token)))
                }
                Err(_) if !reentry => {
                    unsure.push((self.nodes[*i].clone(), Binding::Attempt(attempt.id)))
                }
                _ => {}
            }
        }
        self.settle_after_loss(rest, lock.clone(), (!reentry).then_some(attempt.id));
        if !unsure.is_empty() {
            let undo = self.undo(lock.clone());
            self.finish_later(async move {
                join_all(unsure.into_iter().map(|(node, by)| undo.on(node, by))).await;
            });
        }
        let undo = self.undo(lock.clone());
        join_all(granted.into_iter().map(|(node, by)| undo.on(node, by))).await;
    }

    fn acquire_call(
        &self,
        i: usize,
        lock: &LockParty,
        lease: Duration,
        req: &AcquireRequest<'_>,
        attempt: u64,
    ) -> NodeCall<Grant> {
        let (redis, up) = (self.nodes[i].redis.clone(), self.nodes[i].up.clone());
        let (lock, manager, timeout) = (lock.clone(), self.manager_id.clone(), self.node_timeout);
        let (will_wait, others_waiting) = (req.will_wait, req.others_waiting);
        let about = req.about();
        // the owner's hold there: none, its token, or unknown ('*': whatever the owner has)
        let held = match req.held {
            None => String::new(),
            Some(_) => (self.holds.granted_on(&lock, i)).map_or("*".to_owned(), |t| t.to_string()),
        };
        Box::pin(async move {
            let mut call = ScriptCall::new(&ACQUIRE, 3);
            call.key(&*lock.id)
                .key(waiters_key(&lock.id))
                .key(fence_key(&lock.id))
                .arg(&*lock.owner)
                .arg(millis(lease))
                .arg(&*manager)
                .arg(flag(will_wait))
                .arg(flag(others_waiting))
                .arg(attempt)
                .arg(held)
                .arg(about);
            let call = redis.run_script::<(i64, i64, i64)>(&lock.id, &call);
            let answer = bounded(timeout, &up, call).await;
            (i, answer.map(grant))
        })
    }

    /// The masters still answering after a win: what they answer becomes part of the hold this
    /// attempt made or joined (renewed and released with it) while the owner still has that hold.
    /// Once the owner let go of it (released, or lost and taken anew), what they took is undone:
    /// by its token, or, when their call failed, by the attempt (`fresh`: its id, when it took
    /// the lock afresh; a failed re-entry is left to expire, nothing tells it from the hold).
    /// A late fresh grant counts for the hold's takeover deadline from the attempt's start.
    fn settle_after_win(
        &self,
        mut rest: FuturesUnordered<NodeCall<Grant>>,
        lock: LockParty,
        (hold_token, started): (u64, Instant),
        fresh: Option<u64>,
    ) {
        if rest.is_empty() {
            return;
        }
        let (holds, undo) = (self.holds.clone(), self.undo(lock.clone()));
        let watches = self.watches.clone();
        self.finish_later(async move {
            while let Some((i, answer)) = rest.next().await {
                // a fresh take there made a new hold, which no earlier takeover mark names; a
                // re-entry deleted no mark, and counts from the hold's own renewals
                let fresh_take = matches!(
                    answer,
                    Ok(Grant::Won {
                        reentered: false,
                        ..
                    })
                );
                let (part, taken) = match answer {
                    Ok(Grant::Won { token, .. }) => {
                        (Part::Granted(token), Some(Binding::Token(token)))
                    }
                    Ok(Grant::Busy { .. }) => (Part::Absent, None),
                    Err(_) => (Part::Failed, fresh.map(Binding::Attempt)),
                };
                if holds.settle(&lock, hold_token, i, part) {
                    if fresh_take {
                        watches.granted(&lock, i, started);
                    }
                    continue;
                }
                if let Some(by) = taken {
                    undo.on(undo.nodes[i].clone(), by).await;
                }
            }
        });
    }

    /// The masters still answering after a failed attempt: undo what they grant, by its token;
    /// for a fresh attempt (`fresh`: its id), also what a master that failed may have taken.
    fn settle_after_loss(
        &self,
        mut rest: FuturesUnordered<NodeCall<Grant>>,
        lock: LockParty,
        fresh: Option<u64>,
    ) {
        if rest.is_empty() {
            return;
        }
        let undo = self.undo(lock);
        self.finish_later(async move {
            while let Some((i, answer)) = rest.next().await {
                let taken = match answer {
                    Ok(Grant::Won { token, .. }) => Some(Binding::Token(token)),
                    Ok(Grant::Busy { .. }) => None,
                    Err(_) => fresh.map(Binding::Attempt),
                };
                if let Some(by) = taken {
                    undo.on(undo.nodes[i].clone(), by).await;
                }
            }
        });
    }

    fn undo(&self, lock: LockParty) -> Undo {
        Undo {
            lock,
            nodes: self.nodes.clone(),
            prefix: self.inbox_prefix.clone(),
            timeout: self.node_timeout,
        }
    }
}

/// Undoes one attempt's grants on the masters.
struct Undo {
    lock: LockParty,
    nodes: Vec<Node>,
    prefix: String,
    timeout: Duration,
}

impl Undo {
    /// Drop the attempt's hold on `node`, found `by` its token or its attempt, telling the next
    /// waiting manager there (this one included: one of its requests may have been kept out by
    /// this very attempt).
    async fn on(&self, node: Node, by: Binding) {
        let call = release_call(&self.lock, &self.prefix, "", by);
        let undo = node.redis.run_script::<i64>(&self.lock.id, &call);
        if let Err(err) = bounded(self.timeout, &node.up, undo).await {
            tracing::debug!(error = %err, lock = %self.lock.id, "could not undo a quorum attempt on a master; it expires");
        }
    }
}

impl Undo {
    /// Drop what a lost hold still had on masters a new hold of its owner re-entered.
    async fn drop_stale(&self, stale: Vec<Stale>) {
        for (i, token, count) in stale {
            for _ in 0..count {
                self.on(self.nodes[i].clone(), Binding::Token(token)).await;
            }
        }
    }
}

/// The call that drops one hold of `lock` on one master, found `by` its token or attempt; when
/// it frees the lock there, it tells one waiting manager other than `skip`.
pub(super) fn release_call(lock: &LockParty, prefix: &str, skip: &str, by: Binding) -> ScriptCall {
    let mut call = ScriptCall::new(&RELEASE, 2);
    call.key(&*lock.id)
        .key(waiters_key(&lock.id))
        .arg(&*lock.owner)
        .arg(prefix)
        .arg(skip);
    match by {
        Binding::Token(token) => call.arg(token).arg(""),
        Binding::Attempt(attempt) => call.arg("").arg(attempt),
    };
    call
}

/// What each master has of an attempt decided by `answers` (those not among them: still pending).
fn parts(n: usize, answers: &[(usize, Result<Grant, BoxError>)]) -> Vec<Part> {
    let mut parts = vec![Part::Pending; n];
    for (i, answer) in answers {
        if let Some(part) = parts.get_mut(*i) {
            *part = match answer {
                Ok(Grant::Won { token, .. }) => Part::Granted(*token),
                Ok(Grant::Busy { .. }) => Part::Absent,
                Err(_) => Part::Failed,
            };
        }
    }
    parts
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
