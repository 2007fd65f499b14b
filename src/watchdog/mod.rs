//! The watchdog: one task per manager. Every lease/3 it renews every held lease in batches (many locks
//! per round trip). A renewal that finds a lock gone marks its guard lost at once; a lease that was
//! not renewed in time is lost when it may have run out (its guard's deadline, which every renewal
//! moves on). Every eviction/3 it heartbeats the requests queued for fair locks, so that only dead
//! waiters are evicted. With a takeover grace, once a second while requests wait, it probes the
//! holders of their locks for death (`probes.rs`). The same task runs the manager's background
//! work (see `crate::background`): releases sent from a `Drop`, and the rest of an operation whose
//! caller went away.

mod claims;
mod fixed;
mod leases;
mod probes;
mod queued;

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::future::{join_all, BoxFuture};
use tokio::sync::{oneshot, Notify};
use tokio::time::MissedTickBehavior;

use crate::backend::{Backend, LockParty, OutageLog};
use crate::background::BackgroundQueue;
use crate::waiters::WaitRegistry;
use claims::extend_claims;
pub(crate) use claims::Claims;
pub(crate) use fixed::FixedHolds;
pub(crate) use leases::{HoldStart, Leases};
pub(crate) use queued::Queued;

/// The watchdog's rounds, as the outage log names them.
const RENEWALS: &str = "lease renewals";
const HEARTBEATS: &str = "waiter heartbeats";

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
    /// Told when a connection to Redis came back (the server may have restarted and forgotten
    /// locks): renew every lease now, so that a lease gone with it is known lost at once.
    pub(crate) recheck: Arc<Notify>,
    /// Fires when the manager shuts down: the background work is finished, and the watchdog ends.
    pub(crate) stopped: oneshot::Receiver<()>,
    /// Where a failed round is logged: at WARN only when it begins an outage.
    pub(crate) outages: Arc<OutageLog>,
    /// Sets the manager's oldest-wait gauge: called at the slow tick, so no request pays for it.
    pub(crate) wait_ages: WaitAges,
    /// Whether the holders of the locks local requests wait for are probed for death (the
    /// manager has a takeover grace).
    pub(crate) probes: bool,
    /// The holds with a fixed lease, which renewal rounds touch while `probes` is on.
    pub(crate) fixed: FixedHolds,
}

/// What sets a manager's oldest-wait gauge.
pub(crate) struct WaitAges(pub(crate) Box<dyn Fn() + Send + Sync>);

impl std::fmt::Debug for WaitAges {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WaitAges")
    }
}

impl Watchdog {
    /// Run until the manager shuts down (then finish the background work first), or until every
    /// handle of its background queue (the manager, its guards and its backend) is gone. The
    /// background work runs in a task of its own: it wakes once or twice per release sent from a
    /// `Drop` (every request of a `LockLayer`), and each wake of this task polls every timer below.
    pub(crate) async fn run(mut self, background: BackgroundQueue) {
        let (stop_background, background_stopped) = oneshot::channel();
        let mut background = tokio::spawn(background.run(background_stopped));
        let mut renew_tick = every(self.lease / 3);
        // This tick keeps the runtime's timer driver due within HEARTBEAT. Tokio wakes its driver
        // thread whenever a timer earlier than its next wake-up is registered; with the driver
        // always due soon, the per-command timeouts (further ahead) never cost a wake-up. It also
        // sets the oldest-wait gauge, which no request pays for.
        let mut driver_tick = every(HEARTBEAT);
        let mut beat_tick = every(self.eviction / 3);
        let mut probe_tick = every(probes::PROBE_EVERY);
        let (mut renewals, mut heartbeats, mut extensions) =
            (Round::default(), Round::default(), Round::default());
        let mut probes = Round::default();
        loop {
            tokio::select! {
                _ = driver_tick.tick() => (self.wait_ages.0)(),
                _ = &mut background => return,
                _ = &mut self.stopped => {
                    let _ = stop_background.send(());
                    let _ = background.await;
                    return;
                }
                _ = renew_tick.tick(), if renewals.is_idle() => renewals.start(self.renewal_round()),
                // a reconnection: renew now, or as soon as the round out ends
                _ = self.recheck.notified() => renewals.start_or_defer(|| self.renewal_round()),
                _ = renewals.done() => renewals.start_if_due(|| self.renewal_round()),
                // Heartbeats and claim extensions go in rounds of their own: however slow the
                // extensions, they never hold a heartbeat back past a live waiter's eviction. A
                // round still out at the tick goes again as soon as it ends, not a tick later: a
                // heartbeat a whole eviction after the last would find its waiter evicted.
                _ = beat_tick.tick() => {
                    heartbeats.start_or_defer(|| self.heartbeat_round());
                    extensions.start_or_defer(|| self.extension_round());
                }
                _ = heartbeats.done() => heartbeats.start_if_due(|| self.heartbeat_round()),
                _ = extensions.done() => extensions.start_if_due(|| self.extension_round()),
                _ = probe_tick.tick(), if self.probes => {
                    probes.start_or_defer(|| self.probe_round());
                }
                _ = probes.done() => probes.start_if_due(|| self.probe_round()),
            }
        }
    }

    /// Renew every lease; with takeover on, touch every hold with a fixed lease too.
    fn renewal_round(&self) -> BoxFuture<'static, ()> {
        let backend = self.backend.clone();
        let renewals = renew_all(
            backend.clone(),
            self.leases.clone(),
            self.lease,
            self.outages.clone(),
        );
        let fixed = match self.probes {
            true => (self.fixed.0)(),
            false => Vec::new(),
        };
        Box::pin(async move {
            futures_util::future::join(renewals, fixed::touch_fixed(backend, fixed)).await;
        })
    }

    /// Heartbeat every queued fair waiter.
    fn heartbeat_round(&self) -> BoxFuture<'static, ()> {
        let (backend, queued) = (self.backend.clone(), self.queued.clone());
        let (waiters, outages) = (self.waiters.clone(), self.outages.clone());
        Box::pin(heartbeat_all(backend, queued, waiters, outages))
    }

    /// Probe the holders of the locks local requests wait for.
    fn probe_round(&self) -> BoxFuture<'static, ()> {
        let (backend, waiters) = (self.backend.clone(), self.waiters.clone());
        Box::pin(probes::probe_all(backend, waiters, self.outages.clone()))
    }

    /// Extend every fresh fair grant's claim to its holder's lease.
    fn extension_round(&self) -> BoxFuture<'static, ()> {
        let (backend, claims) = (self.backend.clone(), self.claims.clone());
        Box::pin(async move { extend_claims(&backend, &claims).await })
    }
}

/// A ticking interval of `period` (at least 1 ms) whose first tick is one period from now, and
/// whose missed ticks are not made up.
fn every(period: Duration) -> tokio::time::Interval {
    let period = period.max(Duration::from_millis(1));
    let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
    tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
    tick
}

/// One kind of round, at most one of it in flight, and whether another is due when it ends.
#[derive(Default)]
struct Round {
    flight: Option<BoxFuture<'static, ()>>,
    due: bool,
}

impl Round {
    fn is_idle(&self) -> bool {
        self.flight.is_none()
    }

    fn start(&mut self, round: BoxFuture<'static, ()>) {
        self.flight = Some(round);
    }

    /// Start a round now, or, while one is out, as soon as it ends ([`Round::start_if_due`]).
    fn start_or_defer(&mut self, round: impl FnOnce() -> BoxFuture<'static, ()>) {
        match self.is_idle() {
            true => self.start(round()),
            false => self.due = true,
        }
    }

    /// After [`Round::done`]: start the round that came due while the last one was out.
    fn start_if_due(&mut self, round: impl FnOnce() -> BoxFuture<'static, ()>) {
        if std::mem::take(&mut self.due) {
            self.start(round());
        }
    }

    /// Resolves when the round in flight ends; pending while there is none.
    async fn done(&mut self) {
        match self.flight.as_mut() {
            Some(round) => {
                round.await;
                self.flight = None;
            }
            None => std::future::pending().await,
        }
    }
}

/// One heartbeat round: every queued fair waiter, in batches. A waiter found out of its queue (granted
/// while its message was lost, or evicted while Redis was out of reach), or queued for a lock that is
/// free (a grant to a frozen process ran out), is woken to re-check.
async fn heartbeat_all(
    backend: Arc<Backend>,
    queued: Arc<Queued>,
    waiters: Arc<WaitRegistry>,
    outages: Arc<OutageLog>,
) {
    let all = queued.snapshot();
    let started = Instant::now();
    let batches = all.chunks(backend.renew_batch_size()).map(|batch| {
        let backend = backend.clone();
        async move { (batch, backend.heartbeat(batch).await) }
    });
    for (batch, result) in join_all(batches).await {
        match result {
            Ok(alive) => {
                outages.answered(HEARTBEATS);
                for (waiter, waiting_behind_holder) in batch.iter().zip(alive) {
                    if waiting_behind_holder {
                        queued.confirm(waiter, started);
                    } else {
                        waiters.wake_waiter(&waiter.id, &waiter.owner);
                    }
                }
            }
            Err(err) => {
                let err = format!("waiter heartbeat failed for {} waiters: {err}", batch.len());
                outages.failed(HEARTBEATS, &err);
            }
        }
    }
}

/// One renewal round: every lease, in batches sent concurrently (one batch asks for one lease:
/// the leases cut to their holds' ceilings go in batches of their own).
async fn renew_all(
    backend: Arc<Backend>,
    leases: Arc<Leases>,
    lease: Duration,
    outages: Arc<OutageLog>,
) {
    let mut held = leases.snapshot(lease);
    if held.is_empty() {
        return;
    }
    held.sort_by_key(|renewal| std::cmp::Reverse(renewal.lease));
    let started = Instant::now();
    let batches = (held.chunk_by(|a, b| a.lease == b.lease))
        .flat_map(|same_lease| same_lease.chunks(backend.renew_batch_size()))
        .map(|batch| {
            let backend = backend.clone();
            let locks: Vec<LockParty> = batch.iter().map(|r| r.lock.clone()).collect();
            async move { (batch, backend.renew(&locks, batch[0].lease).await) }
        });
    for (batch, result) in join_all(batches).await {
        match result {
            Ok(renewed) => {
                outages.answered(RENEWALS);
                for (r, ok) in batch.iter().zip(renewed) {
                    leases.record(&r.lock, r.token, Some(ok), started, r.lease);
                }
            }
            Err(err) => {
                let err = format!("lease renewal failed for {} locks: {err}", batch.len());
                outages.failed(RENEWALS, &err);
                for r in batch {
                    leases.record(&r.lock, r.token, None, started, r.lease);
                }
            }
        }
    }
}
