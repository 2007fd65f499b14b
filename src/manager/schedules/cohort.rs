//! The cohort hand-off under many schedules: three requests of this process take the lock twice
//! each through their cohort (at most two hand-offs in a row), a request of another process takes
//! it in the server twice, and the lease of a cohort's hold may be lost at any step, the server
//! forgetting the hold just after.

use std::pin::pin;
use std::sync::Arc;
use std::time::Instant;

use futures_util::future::{select, Either};
use shuttle::future::{block_on, spawn, yield_now, JoinHandle};
use tokio::sync::oneshot;

use super::server::Server;
use super::Checks;
use crate::ids::OwnerId;
use crate::lease::LostSignal;
use crate::manager::cohort::{Enter, Released, Seat, Turn};
use crate::manager::live::{Hold, Through};
use crate::manager::{LockManager, Shared, Timing};
use crate::options::Mode;
use crate::schedules::{explore, finds};
use crate::sync::{Defect, Mutex};
use crate::waiters::LockId;

const REQUESTS: usize = 3;
const ROUNDS: usize = 2;
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

    /// Request `who` takes the lock through its cohort, holds it for a step, and releases it.
    async fn request(self: &Arc<Self>, who: usize) {
        let owner = &self.owners[who];
        let (hold, token) = loop {
            let turn = match self.shared.cohorts.enter(&self.id, owner, true, false) {
                Enter::Lead(seat, lost) => {
                    if let Some(lost) = lost {
                        self.server.release(&lost.owner);
                    }
                    Turn::Lead(seat)
                }
                Enter::Queued(next) => next.await.expect("a queued request gets its turn"),
                Enter::AfterLeader(settled) => {
                    settled.await;
                    continue;
                }
                other => panic!("request {who} entered as {other:?}"),
            };
            match turn {
                Turn::Inherit(inheritance) => break inheritance.take().expect("a hold"),
                Turn::Lead(seat) => break self.lead(seat, owner).await,
                Turn::Alone => panic!("no leader's attempt fails here"),
            }
        };
        self.checks.hold(who, true, token, &hold.lost);
        yield_now().await;
        self.checks.unhold(who);
        self.release(hold).await;
    }

    /// Take the lock in the server as the cohort's leader (`lead_cohort`).
    async fn lead(self: &Arc<Self>, seat: Seat, owner: &OwnerId) -> (Hold, u64) {
        let leader = self.shared.new_owner_id();
        seat.leading(&leader);
        let connections = self.shared.waiters.wake_alls();
        let lost = Arc::new(LostSignal::new(self.key.clone(), None));
        let token = self.server.acquire(&leader, true, &lost).await;
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
        (hold, token)
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
                    for _ in 0..ROUNDS {
                        world.request(who).await;
                    }
                })
            })
            .collect();
        tasks.push(spawn(world.clone().remote()));
        tasks.push(spawn(world.clone().lose_a_lease()));
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
fn a_hand_off_that_also_releases_is_found() {
    let failure = finds(Defect::HandOffAndRelease, scenario);
    assert!(failure.contains("double holder"), "{failure}");
}
