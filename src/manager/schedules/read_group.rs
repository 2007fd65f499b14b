//! The read groups under many schedules: three read requests of this process take the lock
//! twice each through their read groups (at most two joins per group), a write of another
//! process takes it in the server twice, and the lease of a group's hold may be lost at any step,
//! the server forgetting the hold just after.

use std::sync::Arc;
use std::time::Instant;

use shuttle::future::{block_on, spawn, yield_now};

use super::server::Server;
use super::Checks;
use crate::ids::OwnerId;
use crate::lease::LostSignal;
use crate::manager::live::{Hold, Through};
use crate::manager::read_group::{EnterRead, ReadSeat, ReadTurn};
use crate::manager::{LockManager, Shared, Timing};
use crate::options::Mode;
use crate::schedules::{explore, finds};
use crate::sync::{Defect, Mutex};
use crate::waiters::LockId;

const READS: usize = 3;
const ROUNDS: usize = 2;
/// The request number the other process's write goes by.
const WRITER: usize = 99;

/// One scenario's manager, server and checks.
struct World {
    shared: Arc<Shared>,
    id: LockId,
    key: Arc<str>,
    owners: Vec<OwnerId>,
    writer: OwnerId,
    server: Server,
    checks: Checks,
    /// Each group's leader, with the step before its hold was established (and reads joined).
    established: Mutex<Vec<(OwnerId, u64)>>,
}

impl World {
    fn new() -> Self {
        let manager = LockManager::memory_with(Timing {
            lease: crate::manager::DEFAULT_LEASE,
            eviction: crate::manager::DEFAULT_FAIR_EVICTION,
            handoffs: 2,
            label: std::sync::Arc::from("schedules"),
        });
        let owners = (0..READS).map(|n| OwnerId::new(format!("local:{n}")));
        World {
            shared: manager.shared.clone(),
            id: LockId::new("k"),
            key: Arc::from("k"),
            owners: owners.collect(),
            writer: OwnerId::new("writer"),
            server: Server::default(),
            checks: Checks::default(),
            established: Mutex::default(),
        }
    }

    /// Read `who` takes a read hold through a read group, holds it for a step, and leaves.
    async fn read(&self, who: usize) {
        let (hold, token) = self.enter(who).await;
        self.checks.hold(who, false, token, &hold.lost);
        yield_now().await;
        self.checks.unhold(who);
        if let Some(held) = self.leave(&hold) {
            self.server.release(&held.owner);
        }
    }

    /// Enter the read groups until the read holds (`acquire_in_read_group`): its hold and token.
    async fn enter(&self, who: usize) -> (Hold, u64) {
        let owner = &self.owners[who];
        let mut may_confirm = true;
        loop {
            let connections = self.shared.waiters.wake_alls();
            let began = self.checks.tick();
            let entering = (true, may_confirm);
            let turn = match (self.shared.read_groups).enter(
                &self.id,
                owner,
                entering,
                (connections, std::time::Instant::now()),
            ) {
                EnterRead::Lead(seat) => return self.lead(seat, owner).await,
                EnterRead::Joined(hold, token) => {
                    let lost = self.checks.lost_before(&hold.owner, began);
                    assert!(!lost, "a read joined a group whose lease was lost");
                    return (hold, token);
                }
                EnterRead::Confirm(hold) => {
                    if self.server.holds(&hold.owner) {
                        hold.lost.prove(Instant::now());
                    } else {
                        self.checks.lose(&hold.owner, &hold.lost);
                    }
                    may_confirm = false;
                    continue;
                }
                EnterRead::Queued(next) => next.await.expect("a queued read gets its turn"),
                other => panic!("read {who} entered as {other:?}"),
            };
            match turn {
                ReadTurn::Join(membership) => {
                    let (hold, token) = membership.take().expect("a membership holds");
                    let lost = self.lost_before_established(&hold.owner);
                    assert!(!lost, "a read joined a group whose lease was lost");
                    return (hold, token);
                }
                ReadTurn::Again => continue,
                ReadTurn::Alone => panic!("no leader's attempt fails here"),
            }
        }
    }

    /// Take the read hold in the server for a new group (`lead_read_group`).
    async fn lead(&self, seat: ReadSeat, owner: &OwnerId) -> (Hold, u64) {
        let leader = self.shared.new_owner_id();
        let connections = self.shared.waiters.wake_alls();
        let lost = Arc::new(LostSignal::new(self.key.clone(), None));
        let token = self.server.acquire(&leader, false, &lost).await;
        let hold = Hold {
            key: self.key.clone(),
            id: self.id.clone(),
            owner: leader.clone(),
            token,
            watched: true,
            lost,
            mode: Mode::Read,
            through: Through::ReadGroup(seat.number, owner.clone()),
        };
        let at = self.checks.tick();
        self.established.lock().unwrap().push((leader, at));
        seat.established(hold.clone(), connections, &self.shared);
        (hold, token)
    }

    /// Whether the lease of the group led by `leader` was lost before its hold was established.
    fn lost_before_established(&self, leader: &OwnerId) -> bool {
        let established = self.established.lock().unwrap();
        let at = established
            .iter()
            .find(|(o, _)| o == leader)
            .map(|(_, at)| *at);
        at.is_some_and(|at| self.checks.lost_before(leader, at))
    }

    /// The member holding `hold` leaves (`leave_read_group`): the group's hold, if it was last.
    fn leave(&self, hold: &Hold) -> Option<Hold> {
        let Through::ReadGroup(number, owner) = &hold.through else {
            panic!("a read holds through its group");
        };
        self.shared.read_groups.leave(&hold.id, *number, owner)
    }

    /// Another process writes: it takes the lock in the server, holds it a step, releases it.
    async fn write(self: Arc<Self>) {
        for _ in 0..ROUNDS {
            let lost = Arc::new(LostSignal::new(self.key.clone(), None));
            let token = self.server.acquire(&self.writer, true, &lost).await;
            self.checks.hold(WRITER, true, token, &lost);
            yield_now().await;
            self.checks.unhold(WRITER);
            self.server.release(&self.writer);
        }
    }

    /// At some step, the lease of a group's hold is lost: its signal fires, then the server
    /// forgets it.
    async fn lose_a_lease(self: Arc<Self>) {
        for _ in 0..24 {
            yield_now().await;
            if let Some((owner, lost)) = self.server.a_hold(|o| *o != self.writer) {
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
        let mut tasks: Vec<_> = (0..READS)
            .map(|who| {
                let world = world.clone();
                spawn(async move {
                    for _ in 0..ROUNDS {
                        world.read(who).await;
                    }
                })
            })
            .collect();
        tasks.push(spawn(world.clone().write()));
        tasks.push(spawn(world.clone().lose_a_lease()));
        for task in tasks {
            task.await.expect("every request is served");
        }
        assert!(world.server.is_free(), "a hold was left in the server");
        assert!(world.checks.nobody_holds());
        assert_eq!(
            world.shared.read_groups.waiting(),
            0,
            "a read was left waiting"
        );
    });
}

#[test]
fn read_groups_keep_exclusion_under_every_schedule_explored() {
    explore(scenario);
}

#[test]
fn a_join_of_a_lost_group_is_found() {
    let failure = finds(Defect::JoinLost, scenario);
    assert!(failure.contains("whose lease was lost"), "{failure}");
}
