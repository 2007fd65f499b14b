//! The watchdog: ONE task per manager. Every lease/3 it renews every held lease in batches (many locks
//! per round trip). A renewal that finds a lock gone marks its guard lost at once; a lease that was
//! not renewed in time is lost when it may have run out (its guard's deadline, which every renewal
//! moves on). Every eviction/3 it heartbeats the requests queued for fair locks, so that only dead
//! waiters are evicted. The same task runs the manager's background work (see `crate::background`):
//! releases sent from a `Drop`, and the rest of an operation whose caller went away.

mod claims;
mod leases;
mod queued;

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::future::{join_all, BoxFuture};
use tokio::sync::Notify;
use tokio::time::MissedTickBehavior;

use crate::backend::{Backend, HeldLock};
use crate::background::BackgroundQueue;
use crate::waiters::WaitRegistry;
use claims::extend_claims;
pub(crate) use claims::Claims;
pub(crate) use leases::Leases;
pub(crate) use queued::Queued;

/// How often the watchdog task wakes at the least (see `Watchdog::run`).
const HEARTBEAT: Duration = Duration::from_millis(500);

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
    /// Work whose caller went away, run here.
    pub(crate) background: BackgroundQueue,
    /// Told when a connection to Redis came back (the server may have restarted and forgotten
    /// locks): renew every lease now, so that a lease gone with it is known lost at once.
    pub(crate) recheck: Arc<Notify>,
}

impl Watchdog {
    /// Run until every handle of its background queue (the manager, its guards and its backend) is
    /// gone.
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
        let mut round: Option<BoxFuture<'static, ()>> = None;
        // a reconnection came while a round was out: the next round goes as soon as it ends
        let mut recheck_due = false;
        let mut beat_round: Option<BoxFuture<'static, ()>> = None;
        loop {
            tokio::select! {
                _ = heartbeat.tick() => {}
                _ = beats.tick(), if beat_round.is_none() => {
                    let (backend, queued, waiters) =
                        (self.backend.clone(), self.queued.clone(), self.waiters.clone());
                    let claims = self.claims.clone();
                    // side by side: slow claim extensions must not hold the heartbeats back past
                    // the eviction deadline of live waiters
                    beat_round = Some(Box::pin(async move {
                        let claims = extend_claims(&backend, &claims);
                        tokio::join!(claims, heartbeat_all(backend.clone(), queued, waiters));
                    }));
                }
                _ = async { if let Some(r) = beat_round.as_mut() { r.await } }, if beat_round.is_some() => {
                    beat_round = None;
                }
                work = self.background.next() => match work {
                    Some(work) => { tokio::spawn(work); }
                    None => return,
                },
                _ = tick.tick(), if round.is_none() => {
                    round = Some(self.renewal_round());
                }
                _ = self.recheck.notified() => {
                    match round {
                        None => round = Some(self.renewal_round()),
                        Some(_) => recheck_due = true,
                    }
                }
                _ = async { if let Some(r) = round.as_mut() { r.await } }, if round.is_some() => {
                    round = std::mem::take(&mut recheck_due).then(|| self.renewal_round());
                }
            }
        }
    }
}

impl Watchdog {
    fn renewal_round(&self) -> BoxFuture<'static, ()> {
        Box::pin(renew_all(
            self.backend.clone(),
            self.leases.clone(),
            self.lease,
        ))
    }
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
                        waiters.wake_waiter(&waiter.id, &waiter.owner);
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
