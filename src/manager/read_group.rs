//! Read groups: the read requests of this process for one read/write lock share one read hold in
//! the backend. The first takes it, as the group's leader, under an owner id of its own; the reads
//! that come while it waits or holds join it in memory — no round trip — up to the bound of local
//! hand-offs; the backend's hold is released when the group's last member leaves.
//!
//! Each member gets the next token of the block the backend reserved with the group's hold, and
//! shares its lease (renewed by the watchdog) and its lost signal; a re-entry of a member gets
//! that member's own token again. A group whose hold is lost, or whose connection to Redis
//! dropped since the leader began, takes no new member; nor does one whose hold the server did
//! not vouch for recently (see `cohort/hand_off.rs`) until a confirmation does.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use tokio::sync::oneshot;

mod seat;

pub(crate) use seat::{Membership, ReadSeat};

use super::cohort::proven;
use super::live::{Hold, Through};
use super::Shared;
use crate::ids::{IdMap, OwnerId};
use crate::sync::{seeded, AtomicU64, Defect, Mutex, MutexGuard};
use crate::waiters::LockId;

/// The read groups of one manager, by lock.
#[derive(Debug)]
pub(crate) struct ReadGroups {
    table: Mutex<Table>,
    next: AtomicU64,
    /// Members that may join a group after its leader (0: no read groups).
    pub(crate) bound: u32,
}

#[derive(Debug, Default)]
struct Table {
    /// The groups of each lock: at most one open (taking members), the others sealed (waiting
    /// for their members to leave).
    locks: IdMap<LockId, Vec<Group>>,
    /// Set by the shutdown: nobody enters any more.
    closed: bool,
}

/// The read requests of this process sharing one read hold of a lock.
#[derive(Debug)]
struct Group {
    number: u64,
    /// New reads may join.
    open: bool,
    /// The backend's hold, once the leader took it.
    held: Option<Hold>,
    /// The last token handed out under `held`.
    last_token: u64,
    /// Members that joined after the leader.
    joins: u32,
    /// The manager's count of connection troubles when the leader began (see `Cohort`).
    connections: u64,
    /// The owners of the requests holding through the group (the leader's from the start), each
    /// with the token it got (the leader's is the hold's, once taken).
    members: Vec<(OwnerId, u64)>,
    /// The reads waiting for the leader's hold.
    waiting: Vec<(OwnerId, Instant, oneshot::Sender<ReadTurn>)>,
}

/// What a read request entering its lock's read groups is to do.
#[derive(Debug)]
pub(crate) enum EnterRead {
    /// Take the read hold in the backend, as a new group's leader.
    Lead(ReadSeat),
    /// The request joined a group: it holds through the hold given, under the token given.
    Joined(Hold, u64),
    /// The open group's hold was not vouched for by the server recently: confirm it (the hold
    /// given), then enter again, without asking for a confirmation.
    Confirm(Hold),
    /// The group's leader is taking the hold: wait for it.
    Queued(oneshot::Receiver<ReadTurn>),
    /// The group's leader is taking the hold, and this request does not wait: ask the backend.
    Alone,
    /// The manager shut down.
    Closed,
}

/// How a read waiting for its group's leader goes on.
#[derive(Debug)]
pub(crate) enum ReadTurn {
    /// It joined the group.
    Join(Membership),
    /// The group is full, or its leader gave up: enter again.
    Again,
    /// The leader's attempt failed: ask the backend alone, to learn its own answer.
    Alone,
}

impl ReadGroups {
    pub(crate) fn new(bound: u32) -> Self {
        ReadGroups {
            table: Mutex::default(),
            next: AtomicU64::new(1),
            bound,
        }
    }

    fn table(&self) -> MutexGuard<'_, Table> {
        // every operation leaves the table consistent before it could panic
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Enter the read groups of `id` as a request of `owner` (`wait`: it may wait for a leader;
    /// `since`: when it began); `connections`: the manager's count of connection troubles now;
    /// `may_confirm`: joining a hold not proven recently asks for a confirmation
    /// ([`EnterRead::Confirm`]) instead of sealing its group.
    pub(crate) fn enter(
        self: &Arc<Self>,
        id: &LockId,
        owner: &OwnerId,
        (wait, may_confirm): (bool, bool),
        (connections, since): (u64, Instant),
    ) -> EnterRead {
        let mut table = self.table();
        if table.closed {
            return EnterRead::Closed;
        }
        let groups = table.locks.entry(id.clone()).or_default();
        // a re-entry joins the owner's group whatever the bound: the backend would wait behind a
        // queued write for ever, the write waiting for the owner's first read
        let live = |g: &&mut Group| g.held.as_ref().is_some_and(|h| !h.lost.is_lost());
        let mine = (groups.iter_mut().filter(live))
            .find_map(|g| g.token_of(owner).map(|token| (g, token)));
        if let Some((group, token)) = mine {
            // (not a new acquisition: the owner's own token, which needs no new proof)
            let hold = group.held.clone().expect("a live group holds");
            group.members.push((owner.clone(), token));
            let through = Through::ReadGroup(group.number, owner.clone());
            return EnterRead::Joined(hold.through(through), token);
        }
        if let Some(group) = groups.iter_mut().find(|g| g.open) {
            if group.held.is_none() {
                if !wait {
                    return EnterRead::Alone;
                }
                let (turn, next) = oneshot::channel();
                group.waiting.push((owner.clone(), since, turn));
                return EnterRead::Queued(next);
            }
            if let Some(hold) = group.unproven(self.bound, connections) {
                if may_confirm {
                    return EnterRead::Confirm(hold);
                }
                // confirmed already, to no avail: this request leads a new group
                group.open = false;
            }
            if let Some(joined) = group.join(owner, self.bound, connections) {
                return EnterRead::Joined(joined.0, joined.1);
            }
        }
        let number = self.next.fetch_add(1, Ordering::Relaxed);
        groups.push(Group::led_by(number, owner));
        EnterRead::Lead(ReadSeat {
            groups: self.clone(),
            id: id.clone(),
            number,
            armed: true,
        })
    }

    /// Whether `owner` holds `id` through a read group (a write of its would never be granted).
    pub(crate) fn is_member(&self, id: &LockId, owner: &OwnerId) -> bool {
        let table = self.table();
        let groups = table.locks.get(id).map(Vec::as_slice).unwrap_or_default();
        groups.iter().any(|g| g.token_of(owner).is_some())
    }

    /// A member of group `number` of `id` leaves: when it was the last, the group ends, and its
    /// hold in the backend is returned, to release.
    pub(crate) fn leave(&self, id: &LockId, number: u64, owner: &OwnerId) -> Option<Hold> {
        let mut table = self.table();
        let groups = table.locks.get_mut(id)?;
        let at = groups.iter().position(|g| g.number == number)?;
        let group = &mut groups[at];
        let member = group.members.iter().position(|(m, _)| m == owner)?;
        group.members.swap_remove(member);
        if !group.members.is_empty() {
            return None;
        }
        // nobody waits: reads wait only for a leader, and a leader is a member
        let group = groups.swap_remove(at);
        if groups.is_empty() {
            table.locks.remove(id);
        }
        group.held
    }

    /// Shut down: nobody enters any more, and every waiting read is told (its channel closes).
    pub(crate) fn close(&self) {
        let mut table = self.table();
        table.closed = true;
        for group in table.locks.values_mut().flatten() {
            group.waiting.clear();
        }
    }

    /// Reads waiting for a group's leader.
    pub(crate) fn waiting(&self) -> usize {
        let table = self.table();
        let waiting = table
            .locks
            .values()
            .flatten()
            .flat_map(|g| g.waiting.iter());
        waiting.filter(|(_, _, turn)| !turn.is_closed()).count()
    }

    /// When each read waiting for a group's leader began.
    pub(crate) fn for_each_wait(&self, mut each: impl FnMut(Instant)) {
        let table = self.table();
        let waiting = table
            .locks
            .values()
            .flatten()
            .flat_map(|g| g.waiting.iter());
        waiting
            .filter(|(_, _, turn)| !turn.is_closed())
            .for_each(|(_, since, _)| each(*since));
    }

    /// The leader of group `number` took the hold: the waiting reads join, up to the bound; the
    /// others enter again (one of them leads the next group).
    fn establish(
        &self,
        id: &LockId,
        number: u64,
        hold: Hold,
        connections: u64,
        shared: &Arc<Shared>,
    ) {
        let mut table = self.table();
        let groups = table.locks.get_mut(id);
        let Some(group) = groups.and_then(|groups| groups.iter_mut().find(|g| g.number == number))
        else {
            return;
        };
        group.last_token = hold.token;
        group.connections = connections;
        for (_, token) in group.members.iter_mut() {
            // the leader's (its request is the only member yet)
            *token = hold.token;
        }
        group.held = Some(hold);
        // a grant that came by message may not prove the hold recent: the reads enter again, and
        // confirm it
        let unproven = group.unproven(self.bound, connections).is_some();
        for (owner, _, turn) in std::mem::take(&mut group.waiting) {
            let joined = (!unproven)
                .then(|| group.join(&owner, self.bound, connections))
                .flatten();
            let Some((hold, token)) = joined else {
                let _ = turn.send(ReadTurn::Again);
                continue;
            };
            let hold = Some(hold);
            let membership = Membership {
                shared: shared.clone(),
                hold,
                token,
            };
            if let Err(ReadTurn::Join(mut unsent)) = turn.send(ReadTurn::Join(membership)) {
                // its request went away: the join is undone here, under the table's lock
                unsent.hold = None;
                group.unjoin(&owner);
            }
        }
    }

    /// Group `number` of `id` ends before its leader took the hold; its waiting reads get `turn`.
    fn end_unheld(&self, id: &LockId, number: u64, turn: fn() -> ReadTurn) {
        let mut table = self.table();
        let Some(groups) = table.locks.get_mut(id) else {
            return;
        };
        if let Some(at) = groups.iter().position(|g| g.number == number) {
            groups.swap_remove(at).end(turn);
        }
        if groups.is_empty() {
            table.locks.remove(id);
        }
    }
}

impl Group {
    fn led_by(number: u64, owner: &OwnerId) -> Self {
        Group {
            number,
            open: true,
            held: None,
            last_token: 0,
            joins: 0,
            connections: 0,
            members: vec![(owner.clone(), 0)],
            waiting: Vec::new(),
        }
    }

    /// The token of `owner`'s hold through this group, if it is a member.
    fn token_of(&self, owner: &OwnerId) -> Option<u64> {
        let member = self.members.iter().find(|(m, _)| m == owner);
        member.map(|(_, token)| *token)
    }

    /// The group's hold, when a new member could join it but for a recent proof that the server
    /// still holds it.
    fn unproven(&self, bound: u32, connections: u64) -> Option<Hold> {
        let held = self.held.as_ref()?;
        let joinable = self.open && self.joins < bound && connections == self.connections;
        (joinable && !held.lost.is_lost() && !proven(&held.lost)).then(|| held.clone())
    }

    /// `owner` joins the held group, if it is open, its hold live, the bound not reached and no
    /// connection dropped since the leader began; else the group is sealed. (The caller saw to
    /// the hold's proof: [`Group::unproven`].) The member's hold and token.
    fn join(&mut self, owner: &OwnerId, bound: u32, connections: u64) -> Option<(Hold, u64)> {
        let held = self.held.as_ref()?;
        if !self.open
            || self.joins >= bound
            || (held.lost.is_lost() && !seeded(Defect::JoinLost))
            || connections != self.connections
        {
            self.open = false;
            return None;
        }
        self.joins += 1;
        self.last_token += 1;
        self.open = self.joins < bound;
        self.members.push((owner.clone(), self.last_token));
        let through = Through::ReadGroup(self.number, owner.clone());
        Some((held.through(through), self.last_token))
    }

    /// Undo the join of `owner`, whose request went away before it learned of it.
    fn unjoin(&mut self, owner: &OwnerId) {
        if let Some(member) = self.members.iter().rposition(|(m, _)| m == owner) {
            self.members.swap_remove(member);
            self.joins -= 1;
        }
    }

    /// The group ends: every read still waiting for it gets `turn`.
    fn end(self, turn: fn() -> ReadTurn) {
        for (_, _, waiting) in self.waiting {
            let _ = waiting.send(turn());
        }
    }
}
