//! The watchdog: ONE task per manager. Every lease/3 it renews every held lease in batches (many locks
//! per round trip). A renewal that finds a lock gone marks its guard lost at once; a lease that was
//! not renewed in time is lost when it may have run out (its guard's deadline, which every renewal
//! moves on). Every eviction/3 it heartbeats the requests
//! queued for fair locks, so that only dead waiters are evicted. The same task runs the chores that must not
//! block a `Drop`: background releases, and the rest of an operation whose caller went away.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use futures_util::future::join_all;
use tokio::sync::mpsc;
use tokio::time::MissedTickBehavior;

use crate::backend::{Backend, HeldLock};
use crate::guard::LostSignal;
use crate::waiters::{LockId, WaitRegistry};

/// How often the watchdog task wakes at the least (see `Watchdog::run`).
const HEARTBEAT: Duration = Duration::from_millis(500);

/// Work handed to the watchdog task to finish in the background.
pub(crate) type Chore = Pin<Box<dyn Future<Output = ()> + Send>>;

#[derive(Debug)]
struct Lease {
    /// Guards of this owner on this lock (re-entry shares one lease).
    guards: usize,
    /// Fires when the lease is lost; holds how long it is known valid (each renewal, counted from
    /// its start, moves that later).
    lost: Arc<LostSignal>,
    /// The fencing token of the holds: a guard of an earlier hold of the same owner (lost, then
    /// the lock taken again) is not one of them.
    token: u64,
}

/// Every watchdog-kept lease of one manager, by (lock, owner).
#[derive(Debug, Default)]
pub(crate) struct Leases {
    table: Mutex<HashMap<(LockId, Arc<str>), Lease>>,
}

impl Leases {
    fn table(&self) -> MutexGuard<'_, HashMap<(LockId, Arc<str>), Lease>> {
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Start (or, on re-entry, join) keeping the lease of `owner` on `id` under `token`, known
    /// valid until `valid_until`.
    pub(crate) fn hold(
        &self,
        id: &LockId,
        owner: &Arc<str>,
        token: u64,
        valid_until: Instant,
    ) -> Arc<LostSignal> {
        let mut table = self.table();
        let fresh = || Lease {
            guards: 0,
            lost: Arc::new(LostSignal::new(Some(valid_until))),
            token,
        };
        let lease = table
            .entry((id.clone(), owner.clone()))
            .or_insert_with(fresh);
        if lease.token != token {
            // The earlier holds of this owner are gone (the lock was taken anew): their guards
            // are lost, and this hold starts its own lease.
            lease.lost.fire();
            *lease = fresh();
        } else if !lease.lost.extend(valid_until) {
            // The lease had run out here before a renewal noticed, yet Redis took this re-entry:
            // the earlier guards stay lost, the holds go on under a new signal.
            lease.lost = Arc::new(LostSignal::new(Some(valid_until)));
        }
        lease.guards += 1;
        lease.lost.clone()
    }

    /// One guard of `owner` on `id` under `token` is released: stop renewing once none is left.
    pub(crate) fn unhold(&self, id: &LockId, owner: &Arc<str>, token: u64) {
        let mut table = self.table();
        let key = (id.clone(), owner.clone());
        if let Some(lease) = table.get_mut(&key).filter(|l| l.token == token) {
            lease.guards -= 1;
            if lease.guards == 0 {
                table.remove(&key);
            }
        }
    }

    /// Every lease, with the token of its holds.
    fn snapshot(&self) -> Vec<(HeldLock, u64)> {
        self.table()
            .iter()
            .map(|((id, owner), lease)| {
                let lock = HeldLock {
                    id: id.clone(),
                    owner: owner.clone(),
                };
                (lock, lease.token)
            })
            .collect()
    }

    /// Number of leases kept (for tests and metrics).
    pub(crate) fn len(&self) -> usize {
        self.table().len()
    }

    /// The outcome of renewing the lease of `lock` whose holds had `token` when the round began.
    fn record(
        &self,
        lock: &HeldLock,
        token: u64,
        outcome: Option<bool>,
        started: Instant,
        lease: Duration,
    ) {
        let mut table = self.table();
        let key = (lock.id.clone(), lock.owner.clone());
        // released meanwhile, or the owner took the lock again since: not this lease any more
        let Some(entry) = table.get_mut(&key).filter(|entry| entry.token == token) else {
            return;
        };
        let lost = match outcome {
            Some(true) => {
                let in_time = entry.lost.extend(started + lease);
                if !in_time {
                    tracing::warn!("lock lease lost: renewed only after it could have run out");
                }
                !in_time
            }
            Some(false) => {
                tracing::warn!("lock lease lost: the lock was gone at renewal");
                true
            }
            None => {
                let expired = entry.lost.is_lost();
                if expired {
                    tracing::warn!("lock lease lost: not renewed for a whole lease period");
                }
                expired
            }
        };
        if lost {
            tracing::debug!(lock = %lock.id, "lease lost");
            entry.lost.fire();
            table.remove(&key);
        }
    }
}

/// The requests of this manager queued for fair locks, by (lock, owner).
#[derive(Debug, Default)]
pub(crate) struct Queued {
    table: Mutex<HashMap<HeldLock, QueuedWaiter>>,
}

#[derive(Debug, Default)]
struct QueuedWaiter {
    requests: usize,
    /// The start of the last heartbeat round that found the waiter still queued behind a holder:
    /// a grant made to it came later.
    confirmed: Option<Instant>,
}

impl Queued {
    fn table(&self) -> MutexGuard<'_, HashMap<HeldLock, QueuedWaiter>> {
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `waiter` joined its lock's queue: heartbeat it until [`Queued::remove`].
    pub(crate) fn add(&self, waiter: &HeldLock) {
        self.table().entry(waiter.clone()).or_default().requests += 1;
    }

    pub(crate) fn remove(&self, waiter: &HeldLock) {
        let mut table = self.table();
        if let Some(entry) = table.get_mut(waiter) {
            entry.requests -= 1;
            if entry.requests == 0 {
                table.remove(waiter);
            }
        }
    }

    /// When `waiter` was last known to be queued, not yet granted (see [`QueuedWaiter`]).
    pub(crate) fn confirmed(&self, waiter: &HeldLock) -> Option<Instant> {
        self.table().get(waiter).and_then(|entry| entry.confirmed)
    }

    fn confirm(&self, waiter: &HeldLock, at: Instant) {
        if let Some(entry) = self.table().get_mut(waiter) {
            entry.confirmed = Some(at);
        }
    }

    fn snapshot(&self) -> Vec<HeldLock> {
        self.table().keys().cloned().collect()
    }

    /// Number of queued requests (for tests and metrics).
    pub(crate) fn len(&self) -> usize {
        self.table().values().map(|entry| entry.requests).sum()
    }
}

/// Fair grants held under their short claim lease: the next heartbeat round extends each to its
/// holder's lease, in batches, instead of one command per grant on the hand-off path.
#[derive(Debug, Default)]
pub(crate) struct Claims {
    table: Mutex<ClaimTable>,
}

#[derive(Debug, Default)]
struct ClaimTable {
    fresh: HashMap<HeldLock, Claim>,
    /// While a round extends the claims it took: those released since, not to be tried again.
    released: Option<std::collections::HashSet<HeldLock>>,
}

/// A grant to extend: to which lease, and the lost signal of its guard, whose deadline moves with
/// the extension.
#[derive(Debug, Clone)]
struct Claim {
    lease: Duration,
    lost: Arc<LostSignal>,
}

impl Claims {
    fn table(&self) -> MutexGuard<'_, ClaimTable> {
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `lock` was granted under a claim lease; extend it to `lease` at the next heartbeat round.
    pub(crate) fn add(&self, lock: HeldLock, lease: Duration, lost: Arc<LostSignal>) {
        self.table().fresh.insert(lock, Claim { lease, lost });
    }

    /// Claims whose extension failed: try again at the next round, unless released meanwhile
    /// (renewals go by owner: a later hold of the same owner must not be stretched), lost, or
    /// granted again.
    fn retry(&self, claims: Vec<(HeldLock, Claim)>) {
        let mut table = self.table();
        for (lock, claim) in claims {
            let released = table.released.as_ref().is_some_and(|r| r.contains(&lock));
            if !released && !claim.lost.is_lost() {
                table.fresh.entry(lock).or_insert(claim);
            }
        }
    }

    /// `lock` was released: nothing to extend.
    pub(crate) fn remove(&self, lock: &HeldLock) {
        let mut table = self.table();
        table.fresh.remove(lock);
        if let Some(released) = table.released.as_mut() {
            released.insert(lock.clone());
        }
    }

    /// The claims to extend in this round; releases are noted until [`Claims::round_done`].
    fn take_all(&self) -> Vec<(HeldLock, Claim)> {
        let mut table = self.table();
        table.released = Some(Default::default());
        table.fresh.drain().collect()
    }

    fn round_done(&self) {
        self.table().released = None;
    }
}

/// The watchdog task of one manager.
#[derive(Debug)]
pub(crate) struct Watchdog {
    pub(crate) backend: Arc<Backend>,
    pub(crate) leases: Arc<Leases>,
    pub(crate) lease: Duration,
    pub(crate) queued: Arc<Queued>,
    pub(crate) claims: Arc<Claims>,
    pub(crate) waiters: Arc<WaitRegistry>,
    /// Fair waiters are heartbeat every eviction/3.
    pub(crate) eviction: Duration,
    pub(crate) chores: mpsc::UnboundedReceiver<Chore>,
}

impl Watchdog {
    /// Run until every sender of chores (the manager and its guards) is gone.
    pub(crate) async fn run(mut self) {
        let period = (self.lease / 3).max(Duration::from_millis(1));
        let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
        tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
        // The heartbeat does nothing but keep the runtime's timer driver due within HEARTBEAT. Tokio
        // wakes its driver thread whenever a timer earlier than its next wake-up is registered; with
        // the driver always due soon, the per-command timeouts (further ahead) never cost a wake-up.
        let mut heartbeat = tokio::time::interval(HEARTBEAT);
        heartbeat.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let beat = (self.eviction / 3).max(Duration::from_millis(1));
        let mut beats = tokio::time::interval_at(tokio::time::Instant::now() + beat, beat);
        beats.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let mut round: Option<Pin<Box<dyn Future<Output = ()> + Send>>> = None;
        let mut beat_round: Option<Pin<Box<dyn Future<Output = ()> + Send>>> = None;
        loop {
            tokio::select! {
                _ = heartbeat.tick() => {}
                _ = beats.tick(), if beat_round.is_none() => {
                    let (backend, queued, waiters) =
                        (self.backend.clone(), self.queued.clone(), self.waiters.clone());
                    let claims = self.claims.clone();
                    beat_round = Some(Box::pin(async move {
                        extend_claims(&backend, &claims).await;
                        heartbeat_all(backend, queued, waiters).await;
                    }));
                }
                _ = async { if let Some(r) = beat_round.as_mut() { r.await } }, if beat_round.is_some() => {
                    beat_round = None;
                }
                chore = self.chores.recv() => match chore {
                    Some(chore) => { tokio::spawn(chore); }
                    None => return,
                },
                _ = tick.tick(), if round.is_none() => {
                    round = Some(Box::pin(renew_all(self.backend.clone(), self.leases.clone(), self.lease)));
                }
                _ = async { if let Some(r) = round.as_mut() { r.await } }, if round.is_some() => {
                    round = None;
                }
            }
        }
    }
}

/// Extend fresh fair grants from their claim lease to their holders' leases, in batches per lease,
/// and move their guards' deadlines with them. A grant found gone is lost; one whose extension
/// failed is tried again at the next round (its guard's deadline is still the claim's end).
async fn extend_claims(backend: &Backend, claims: &Claims) {
    let mut fresh = claims.take_all();
    fresh.sort_by_key(|(_, claim)| claim.lease);
    for same_lease in fresh.chunk_by(|a, b| a.1.lease == b.1.lease) {
        let lease = same_lease[0].1.lease;
        for batch in same_lease.chunks(backend.renew_batch_size()) {
            let locks: Vec<HeldLock> = batch.iter().map(|(lock, _)| lock.clone()).collect();
            let started = Instant::now();
            match backend.renew(&locks, lease).await {
                Ok(extended) => {
                    for ((_, claim), ok) in batch.iter().zip(extended) {
                        if !(ok && claim.lost.extend(started + lease)) {
                            tracing::warn!("fair grant lost before its claim lease was extended");
                            claim.lost.fire();
                        }
                    }
                }
                Err(err) => {
                    tracing::warn!(error = %err, grants = batch.len(), "could not extend fair grants");
                    claims.retry(batch.to_vec());
                }
            }
        }
    }
    claims.round_done();
}

/// One heartbeat round: every queued fair waiter, in batches. A waiter found out of its queue (granted
/// while its message was lost, or evicted while Redis was out of reach), or queued for a lock that is
/// free (a grant to a frozen process ran out), is woken to re-check.
async fn heartbeat_all(backend: Arc<Backend>, queued: Arc<Queued>, waiters: Arc<WaitRegistry>) {
    let all = queued.snapshot();
    let started = Instant::now();
    let batches = all.chunks(backend.renew_batch_size()).map(|batch| {
        let backend = backend.clone();
        async move { (batch, backend.heartbeat(batch).await) }
    });
    for (batch, result) in join_all(batches).await {
        match result {
            Ok(alive) => {
                for (waiter, waiting_behind_holder) in batch.iter().zip(alive) {
                    if waiting_behind_holder {
                        queued.confirm(waiter, started);
                    } else {
                        waiters.wake_owner(&waiter.id, &waiter.owner);
                    }
                }
            }
            Err(err) => {
                tracing::warn!(error = %err, waiters = batch.len(), "waiter heartbeat failed")
            }
        }
    }
}

/// One renewal round: every lease, in batches sent concurrently.
async fn renew_all(backend: Arc<Backend>, leases: Arc<Leases>, lease: Duration) {
    let held = leases.snapshot();
    if held.is_empty() {
        return;
    }
    let started = Instant::now();
    let batches = held.chunks(backend.renew_batch_size()).map(|batch| {
        let backend = backend.clone();
        let locks: Vec<HeldLock> = batch.iter().map(|(lock, _)| lock.clone()).collect();
        async move { (batch, backend.renew(&locks, lease).await) }
    });
    for (batch, result) in join_all(batches).await {
        match result {
            Ok(renewed) => {
                for ((lock, token), ok) in batch.iter().zip(renewed) {
                    leases.record(lock, *token, Some(ok), started, lease);
                }
            }
            Err(err) => {
                tracing::warn!(error = %err, locks = batch.len(), "lease renewal failed");
                for (lock, token) in batch {
                    leases.record(lock, *token, None, started, lease);
                }
            }
        }
    }
}
