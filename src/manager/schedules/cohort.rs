//! The cohort hand-off under many schedules: three requests of this process take the lock twice
//! each through their cohort (at most two hand-offs in a row) — one keeps FIFO order (a fair
//! request, which asks the server whether others wait), one gives up after a few steps of waiting
//! — a request of another process takes it in the server twice, the lease of a cohort's hold may
//! be lost at any step, the server forgetting the hold just after, and a connection may drop.

use std::pin::pin;
use std::sync::Arc;
use std::time::Instant;

use futures_util::future::{select, Either};
use shuttle::future::{block_on, spawn, yield_now, JoinHandle};
use tokio::sync::oneshot;

use super::server::Server;
use super::{within, Checks};
use crate::ids::OwnerId;
use crate::lease::LostSignal;
use crate::manager::cohort::{Enter, Released, Seat, Turn};
use crate::manager::live::{Hold, Through};
use crate::manager::{LockManager, Shared, Timing};
use crate::options::Mode;
use crate::schedules::{explore, finds};
use crate::sync::{Defect, Mutex};
use crate::waiters::{LockId, WaitStart};

const REQUESTS: usize = 3;
const ROUNDS: usize = 2;
/// The steps the impatient request waits for its turn.
const PATIENCE: usize = 3;
/// The request that keeps FIFO order (a fair one).
const FAIR: usize = 1;
/// The request number the other process's holds go by.
const REMOTE: usize = 99;

/// One scenario's manager, server and checks.
struct World {
    shared: Arc<Shared>,
    id: LockId,
    key: Arc<str>,
    owners: Vec<OwnerId>,
    remote: OwnerId,
    server: Server,
    checks: Checks,
    watches: Mutex<Vec<JoinHandle<()>>>,
}

impl World {
    fn new() -> Self {
        let manager = LockManager::memory_with(Timing {
            lease: crate::manager::DEFAULT_LEASE,
            eviction: crate::manager::DEFAULT_FAIR_EVICTION,
            handoffs: 2,
            label: std::sync::Arc::from("schedules"),
        });
        let owners = (0..REQUESTS).map(|n| OwnerId::new(format!("local:{n}")));
        World {
            shared: manager.shared.clone(),
            id: LockId::new("k"),
            key: Arc::from("k"),
            owners: owners.collect(),
            remote: OwnerId::new("remote"),
            server: Server::default(),
            checks: Checks::default(),
            watches: Mutex::default(),
        }
    }

    /// Request `who` takes the lock through its cohort, holds it for a step, and releases it;
    /// with `patience`, it gives up once that many of its steps passed without its turn.
    async fn request(self: &Arc<Self>, who: usize, patience: Option<usize>) {
        let Some((hold, token)) = self.take(who, patience).await else {
            return;
        };
        self.checks.hold(who, true, token, &hold.lost);
        yield_now().await;
        self.checks.unhold(who);
        self.release(hold).await;
    }

    /// Take the lock through the cohort (`acquire_in_cohort`): the hold and token, or `None`
    /// when the request gave up.
    async fn take(self: &Arc<Self>, who: usize, patience: Option<usize>) -> Option<(Hold, u64)> {
        let owner = &self.owners[who];
        let fifo = who == FAIR;
        loop {
            let entered = match self
                .shared
                .cohorts
                .enter(&self.id, owner, (true, fifo), start())
            {
                Enter::Ask {
                    leader,
                    ticket,
                    turn,
                } => self.ask_to_queue(leader, ticket, turn).await,
                entered => entered,
            };
            let turn = match entered {
                Enter::Lead(seat, lost) => {
                    if let Some(lost) = lost {
                        self.server.release(&lost.owner);
                    }
                    Turn::Lead(seat)
                }
                Enter::Queued(mut next) => match within(patience, &mut next).await {
                    Some(turn) => turn.expect("a queued request gets its turn"),
                    None => return Self::late_turn(next).await,
                },
                Enter::AfterLeader(settled) => {
                    settled.await;
                    continue;
                }
                Enter::Alone => Turn::Alone,
                other => panic!("request {who} entered as {other:?}"),
            };
            return match turn {
                Turn::Inherit(inheritance) => inheritance.take(),
                Turn::Lead(seat) => self.lead(seat, owner, patience).await,
                Turn::Alone => Some(self.alone(owner).await),
            };
        }
    }

    /// A request keeping FIFO order asks the server whether anybody but the cohort's `leader`
    /// waits (`ask_to_queue`): if not, it keeps its place in the cohort's line; else it leaves it
    /// (a turn sent meanwhile goes on as if dropped) and takes the lock in the server alone.
    async fn ask_to_queue(
        &self,
        leader: OwnerId,
        ticket: u64,
        turn: oneshot::Receiver<Turn>,
    ) -> Enter {
        // the server's answer takes a round trip
        yield_now().await;
        if !self.server.queued_behind(&leader) {
            self.shared.cohorts.admit(&self.id, ticket);
            return Enter::Queued(turn);
        }
        if let Some((hold, _)) = Self::late_turn(turn).await {
            self.release(hold).await;
        }
        Enter::Alone
    }

    /// Take the lock in the server alone, outside the cohort (`acquire_in_backend`).
    async fn alone(&self, owner: &OwnerId) -> (Hold, u64) {
        let lost = Arc::new(LostSignal::new(self.key.clone(), None));
        let token = self.server.acquire(owner, true, &lost).await;
        let hold = Hold {
            key: self.key.clone(),
            id: self.id.clone(),
            owner: owner.clone(),
            token,
            watched: true,
            lost,
            mode: Mode::Fair,
            through: Through::Backend,
        };
        (hold, token)
    }

    /// The wait of a queued request is over (`queued_wait_ended`): an inheritance sent by the
    /// end of a last step (the leader's verdict) is taken, a lead passed on (the seat, dropped).
    async fn late_turn(mut next: oneshot::Receiver<Turn>) -> Option<(Hold, u64)> {
        yield_now().await;
        next.close();
        match next.try_recv() {
            Ok(Turn::Inherit(inheritance)) => inheritance.take(),
            _ => None,
        }
    }

    /// Take the lock in the server as the cohort's leader (`lead_cohort`); `None` when the
    /// request's patience ran out first (the seat, dropped, passes the lead on).
    async fn lead(
        self: &Arc<Self>,
        seat: Seat,
        owner: &OwnerId,
        patience: Option<usize>,
    ) -> Option<(Hold, u64)> {
        let leader = self.shared.new_owner_id();
        seat.leading(&leader);
        let connections = self.shared.waiters.wake_alls();
        self.checks.began(&leader);
        let lost = Arc::new(LostSignal::new(self.key.clone(), None));
        let token = within(patience, self.server.acquire(&leader, true, &lost)).await?;
        let hold = Hold {
            key: self.key.clone(),
            id: self.id.clone(),
            owner: leader,
            token,
            watched: true,
            lost,
            mode: Mode::Exclusive,
            through: Through::Cohort(owner.clone()),
        };
        if let Some(left) = seat.established(hold.clone(), connections) {
            let world = self.clone();
            let watch = spawn(world.watch(hold.clone(), left));
            self.watches.lock().unwrap().push(watch);
        }
        Some((hold, token))
    }

    /// Watch the lease of the cohort's `hold` until it leaves the cohort (`watch_cohort_hold`).
    async fn watch(self: Arc<Self>, hold: Hold, left: oneshot::Receiver<()>) {
        if let Either::Right(_) = select(pin!(hold.lost.wait()), left).await {
            return;
        }
        if let Some(lost) = self.shared.cohorts.lost(&hold) {
            self.server.release(&lost.owner);
        }
    }

    /// Release `hold` (`release_in_cohort`): hand it on, or give it back to the server.
    async fn release(&self, hold: Hold) {
        if hold.through == Through::Backend {
            self.server.release(&hold.owner);
            return;
        }
        let mut may_confirm = true;
        loop {
            let began = self.checks.tick();
            match self
                .shared
                .cohorts
                .release(&hold, &self.shared, may_confirm)
            {
                Released::Kept => {
                    let lost = self.checks.lost_before(&hold.owner, began);
                    assert!(!lost, "a hold whose lease was lost was handed on");
                    let dropped = self.checks.dropped_since(&hold.owner, began);
                    assert!(!dropped, "a hold was handed on after a connection dropped");
                    return;
                }
                Released::NotHeld => return,
                Released::Confirm(held) => {
                    if self.server.holds(&held.owner) {
                        held.lost.prove(Instant::now());
                    } else {
                        self.checks.lose(&held.owner, &held.lost);
                    }
                    may_confirm = false;
                }
                Released::ToBackend(held, _, succession) => {
                    self.server.release(&held.owner);
                    drop(succession);
                    return;
                }
            }
            yield_now().await;
        }
    }

    /// Another process takes the lock in the server, holds it for a step, and releases it.
    async fn remote(self: Arc<Self>) {
        for _ in 0..ROUNDS {
            let lost = Arc::new(LostSignal::new(self.key.clone(), None));
            let token = self.server.acquire(&self.remote, true, &lost).await;
            self.checks.hold(REMOTE, true, token, &lost);
            yield_now().await;
            self.checks.unhold(REMOTE);
            self.server.release(&self.remote);
        }
    }

    /// At some step, a connection to the server drops and comes back (`wake_all`): the server
    /// may have restarted, and the cohort's hold may be gone with nobody told yet.
    async fn drop_a_connection(self: Arc<Self>) {
        for _ in 0..4 {
            yield_now().await;
        }
        self.checks
            .connection_dropped(|| self.shared.waiters.wake_all());
    }

    /// At some step while requests wait behind it, the lease of the cohort's hold is lost: its
    /// signal fires, then the server forgets it.
    async fn lose_a_lease(self: Arc<Self>) {
        for _ in 0..24 {
            yield_now().await;
            if self.shared.cohorts.waiting() == 0 {
                continue;
            }
            if let Some((owner, lost)) = self.server.a_hold(|o| *o != self.remote) {
                self.checks.lose(&owner, &lost);
                yield_now().await;
                self.server.release(&owner);
                return;
            }
        }
    }
}

fn scenario() {
    block_on(async {
        let world = Arc::new(World::new());
        let mut tasks: Vec<_> = (0..REQUESTS)
            .map(|who| {
                let world = world.clone();
                spawn(async move {
                    // the last request gives up after a few steps of waiting
                    let patience = (who + 1 == REQUESTS).then_some(PATIENCE);
                    for _ in 0..ROUNDS {
                        world.request(who, patience).await;
                    }
                })
            })
            .collect();
        tasks.push(spawn(world.clone().remote()));
        tasks.push(spawn(world.clone().lose_a_lease()));
        tasks.push(spawn(world.clone().drop_a_connection()));
        for task in tasks {
            task.await.expect("every request is served");
        }
        let watches = std::mem::take(&mut *world.watches.lock().unwrap());
        for watch in watches {
            watch.await.expect("a watch ends with its hold");
        }
        assert!(world.server.is_free(), "a hold was left in the server");
        assert!(world.checks.nobody_holds());
        assert_eq!(
            world.shared.cohorts.waiting(),
            0,
            "a request was left waiting"
        );
    });
}

#[test]
fn cohort_hand_offs_keep_exclusion_under_every_schedule_explored() {
    explore(scenario);
}

#[test]
fn a_hand_off_of_a_lost_hold_is_found() {
    let failure = finds(Defect::HandOffLost, scenario);
    assert!(failure.contains("lost was handed on"), "{failure}");
}

#[test]
fn a_hand_off_after_a_connection_dropped_is_found() {
    let failure = finds(Defect::DropIgnored, scenario);
    assert!(failure.contains("after a connection dropped"), "{failure}");
}

#[test]
fn a_hand_off_that_also_releases_is_found() {
    let failure = finds(Defect::HandOffAndRelease, scenario);
    assert!(failure.contains("double holder"), "{failure}");
}

/// A local request's wait, begun now (what the oldest-wait gauge reads).
fn start() -> WaitStart {
    WaitStart {
        mode: Mode::Exclusive,
        since: Instant::now(),
    }
}
