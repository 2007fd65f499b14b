//! Quorum locks (RedLock) over N ≥ 3 independent Redis masters.
//!
//! A lock is held when a majority of the masters granted it within its validity: every call goes to
//! every master at once, each bounded by the per-master timeout, and a round is decided as soon as
//! its outcome is certain (a frozen master costs nothing once a majority answered). What was sent
//! to a master whose answer is still out is finished in the background, and undone if it took a lock
//! nobody holds any more. Each master is a [`RedisBackend`] with its own command pool; every master
//! uses the same manager id, so each one's release scripts publish to the same inbox channel, which
//! the manager subscribes on every master.
//!
//! # Why a quorum lock excludes
//!
//! Each master is asked to keep the lock for `lease + drift` (drift: `lease/100 + 2 ms`). An
//! attempt counts only if a majority granted it and its validity, `(lease + drift) − elapsed −
//! drift`, is positive; the guard counts its lease from the start of the attempt. Every granting
//! master received its call after that start, so it keeps the lock at least until `start + lease +
//! drift` by its own clock, which is later than `start + lease` by ours even when its clock runs
//! 1% fast. Two holders at once would need two majorities granting at once, and any two
//! majorities share a master, which holds one lock at a time.
//!
//! # Why fencing tokens increase
//!
//! Each master issues, per lock, `max(last + 1, its clock in µs)`: its own tokens strictly
//! increase as long as its clock does not step back. A quorum lock's token is the largest of the
//! majority that granted it. Any two majorities share a master, and that master granted the later
//! holder after the earlier holder's hold there had ended. So, always, a holder's token is larger
//! than the token that every master it shares with an earlier holder issued to that earlier holder;
//! but the earlier holder's token may have come from a master the later one did not use. Hence a
//! later holder's token is larger than an earlier holder's whenever the masters' clocks agree to
//! within the time between the two acquisitions: a whole lease after a loss by expiry, as little as
//! a round trip after an explicit release.
//!
//! # Why a dead holder's takeover excludes
//!
//! Each master judges its own part of a hold with the one-server script (`takeover.lua`): it
//! ends its part once the manager's inbox on that master has been missing for the grace, seen
//! twice that far apart with no renewal there between. So each master m that granted a hold has
//! a deadline of its own, by the holder's clock: the later of m's last inbox proof and the start
//! of the last call that made or renewed the hold on m (only a call m answered; a fresh take,
//! never a re-entry, which deletes no mark; a renewal only where the hold was granted, as it goes
//! by owner and elsewhere may have found an earlier hold that a release in flight drops), plus
//! the grace less the drift allowance. Before
//! that deadline m cannot have ended its part. The holder counts its hold lost once fewer than a
//! majority of the masters that granted it have their deadline ahead (`quorum_proof.rs`). A new
//! holder needs a majority of the masters; while a majority V of ours is ahead, any majority of
//! the new holder shares a master with V, which still holds our lock (its lease did not run out
//! either: see above). A minority down, frozen or cut from the inbox therefore loses nothing.
//! Every master's inbox keeps its own proofs: a proof on one says nothing of another.
//!
//! # Why fair locks are refused
//!
//! Every master would keep its own FIFO queue, the parallel requests reach the masters in
//! different orders, and grants made by different masters to different heads would split the lock
//! with nobody holding a majority. One order across masters needs consensus, which RedLock does
//! not have.

mod acquire;
mod connect;
mod holds;
mod inspect;
mod renew;
mod round;
mod takeover;

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use futures_util::future::join_all;
use futures_util::stream::{FuturesUnordered, StreamExt};
use redis::Script;

use super::redis::RedisBackend;
use super::{LockParty, Released};
use crate::background::Background;
use crate::error::BoxError;
use crate::ids::OwnerId;
use crate::inbox_proof::InboxProof;
use crate::key::LockKey;
use crate::waiters::{Departure, LockId, WaitRegistry};
use acquire::release_call;
pub(crate) use connect::connect;
use holds::QuorumHolds;
use round::{gather, majority, NodeCall, Verdict};
use takeover::HoldWatches;

/// Why fair and shared locks are refused on a quorum manager.
pub(crate) const QUEUED_REFUSED: &str = "fair (FIFO), read/write and semaphore locks on a quorum \
     manager: the masters' queues cannot agree on one order";

/// Take a lock on one master (a win never records the manager as waiting).
static ACQUIRE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(&crate::backend::redis::assemble_script(include_str!(
        "acquire.lua"
    )))
});

/// Release one hold on one master (or undo an attempt there); tell one waiting manager when it
/// frees.
static RELEASE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(&crate::backend::redis::assemble_script(include_str!(
        "release.lua"
    )))
});

/// Bound one master's call by the node timeout, connection checkout included (a dead master's
/// connection pool would otherwise wait for its own timeout first), and note whether it answered.
pub(super) async fn bounded<T>(
    timeout: Duration,
    up: &AtomicBool,
    call: impl std::future::Future<Output = Result<T, BoxError>>,
) -> Result<T, BoxError> {
    let answer = match tokio::time::timeout(timeout, call).await {
        Ok(answer) => answer,
        Err(_) => Err(format!("no answer within {timeout:?}").into()),
    };
    up.store(answer.is_ok(), Ordering::Relaxed);
    answer
}

/// One master.
#[derive(Debug, Clone)]
pub(crate) struct Node {
    pub(crate) redis: Arc<RedisBackend>,
    /// `host:port`, for errors (never the URL: it may carry a password).
    pub(crate) name: Arc<str>,
    /// It answered its last call (a master that did not is not waited for when the others can
    /// decide without it).
    pub(crate) up: Arc<AtomicBool>,
}

impl Node {
    pub(crate) fn new(redis: Arc<RedisBackend>, name: String) -> Self {
        Node {
            redis,
            name: Arc::from(name),
            up: Arc::new(AtomicBool::new(true)),
        }
    }
}

/// The masters of one quorum manager.
#[derive(Debug)]
pub(crate) struct QuorumBackend {
    nodes: Vec<Node>,
    manager_id: Arc<str>,
    inbox_prefix: String,
    /// The manager's local waiters: a release wakes the next one here directly.
    waiters: Arc<WaitRegistry>,
    /// The holds this manager has, with the tokens the masters issued for them.
    holds: Arc<QuorumHolds>,
    /// The takeover watches of those holds, which each master's renewals move.
    watches: Arc<HoldWatches>,
    /// The id of the next acquire attempt (see [`holds::Binding`]).
    attempts: AtomicU64,
    /// Bounds each master's call, and the jitter after a failed attempt.
    node_timeout: Duration,
    /// Where calls still in flight after a verdict are finished.
    background: Background,
}

impl QuorumBackend {
    /// The backend over `nodes`, whose inboxes prove themselves in `proofs` (by master index).
    pub(crate) fn new(
        nodes: Vec<Node>,
        proofs: Vec<Arc<InboxProof>>,
        manager_id: Arc<str>,
        inbox_prefix: String,
        waiters: Arc<WaitRegistry>,
        node_timeout: Duration,
        background: Background,
    ) -> Self {
        let quorum = majority(nodes.len());
        QuorumBackend {
            nodes,
            manager_id,
            inbox_prefix,
            waiters,
            holds: Arc::default(),
            watches: Arc::new(HoldWatches::new(proofs, quorum)),
            attempts: AtomicU64::new(1),
            node_timeout,
            background,
        }
    }

    fn quorum(&self) -> usize {
        majority(self.nodes.len())
    }

    /// The masters that failed their last call.
    fn suspects(&self) -> Vec<bool> {
        self.nodes
            .iter()
            .map(|n| !n.up.load(Ordering::Relaxed))
            .collect()
    }

    pub(crate) fn lock_id(&self, key: &LockKey) -> LockId {
        // Every master shares the key space; the first names the lock for all.
        match self.nodes.first() {
            Some(node) => node.redis.lock_id(key),
            None => LockId::new(key.as_str()),
        }
    }

    /// Finish `work` in the background (the rest of a round whose verdict is in).
    fn finish_later(&self, work: impl Future<Output = ()> + Send + 'static) {
        self.background.finish(work);
    }

    /// Release the hold of `owner` made under fencing token `token`, on every master by the token
    /// that master issued for it (or, where that never came back, by the attempt that took it):
    /// never a later hold of the same owner. The verdict comes from a majority; the masters still
    /// answering are finished in the background. The last hold released wakes the next local
    /// waiter here (the masters tell the other managers).
    pub(crate) async fn release(
        &self,
        id: &LockId,
        owner: &OwnerId,
        token: u64,
    ) -> Result<Released, BoxError> {
        let lock = LockParty {
            id: id.clone(),
            owner: owner.as_arc().clone(),
        };
        let Some(release) = self.holds.release(&lock, token) else {
            // lost, and the owner took the lock anew: that hold is not this guard's to drop
            return Ok(Released::NotHeld);
        };
        let last = release.last;
        if last {
            self.watches.forget(&lock);
        }
        let calls = self
            .nodes
            .iter()
            .zip(release.on)
            .enumerate()
            .map(|(i, (node, by))| {
                let Some(by) = by else {
                    // Nothing known there: a master that answered "busy" holds nothing of it (no);
                    // one whose answer is still out is the attempt's settling to undo (unknown).
                    let answer = match release.absent[i] {
                        true => Ok(-1i64),
                        false => Err(BoxError::from("its part of the hold is not known yet")),
                    };
                    return Box::pin(async move { (i, answer) }) as NodeCall<i64>;
                };
                let redis = node.redis.clone();
                let call = release_call(&lock, &self.inbox_prefix, &self.manager_id, by);
                let (timeout, up, id) = (self.node_timeout, node.up.clone(), lock.id.clone());
                Box::pin(async move {
                    (
                        i,
                        bounded(timeout, &up, redis.run_script::<i64>(&id, &call)).await,
                    )
                }) as NodeCall<i64>
            });
        let round = gather(calls, &self.suspects(), |left| *left >= 0).await;
        self.drain(round.rest);
        if last {
            self.waiters.wake_one(id);
        }
        match round.verdict {
            Verdict::Yes if last => Ok(Released::Freed),
            Verdict::Yes => Ok(Released::StillHeld),
            Verdict::No => Ok(Released::NotHeld),
            Verdict::Down => Err(self.down("release", &round.answers)),
        }
    }

    /// Drive calls still in flight to their end in the background.
    fn drain<T: Send + 'static>(&self, mut rest: FuturesUnordered<NodeCall<T>>) {
        if rest.is_empty() {
            return;
        }
        self.finish_later(async move { while rest.next().await.is_some() {} });
    }

    /// A request of this process stopped waiting for `id`: withdraw or pass on, on every master.
    pub(crate) async fn abandon(&self, id: &LockId, departure: Departure) -> Result<(), BoxError> {
        let answers = join_all(
            self.nodes
                .iter()
                .map(|n| bounded(self.node_timeout, &n.up, n.redis.abandon(id, departure))),
        )
        .await;
        if answers.iter().filter(|a| a.is_ok()).count() < self.quorum() {
            let answers: Vec<_> = answers.into_iter().enumerate().collect();
            return Err(self.down("withdrawal of a waiter", &answers));
        }
        Ok(())
    }

    /// The error of a round that fewer than a majority of masters answered.
    fn down<T>(&self, what: &str, answers: &[(usize, Result<T, BoxError>)]) -> BoxError {
        let n = self.nodes.len();
        let answered = answers.iter().filter(|(_, a)| a.is_ok()).count();
        let mut msg = format!(
            "{what}: only {answered} of {n} Redis masters answered; a quorum needs {}",
            self.quorum()
        );
        for (i, node) in self.nodes.iter().enumerate() {
            match answers.iter().find(|(j, _)| *j == i).map(|(_, a)| a) {
                Some(Ok(_)) => {}
                Some(Err(err)) => msg.push_str(&format!("; {}: {err}", node.name)),
                None => msg.push_str(&format!("; {}: no answer yet", node.name)),
            }
        }
        msg.into()
    }
}
