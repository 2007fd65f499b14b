//! Lock cohorting (Dice, Marathe and Shavit, "Lock Cohorting", PPoPP 2012): the exclusive
//! requests of this process for one lock queue here, in memory, in front of the backend. One of
//! them, the cohort's leader, takes the lock in the backend under an owner id of its own. When the
//! request holding it releases while others of this process wait, the next one inherits the
//! backend's hold at once — no round trip — up to a bound of hand-offs; then the hold is released
//! in the backend, so that other processes get their turn, and the next local request leads anew.
//!
//! Every inherited hold gets the next token of the block the backend reserved when the leader
//! took the lock (`TOKEN_BLOCK` in `common.lua`): tokens still rise strictly across local and
//! remote hand-offs. The leader's lease (renewed by the watchdog) and its lost signal serve every
//! request of the cohort: each inherits the same signal, so `lost()` fires for whoever holds.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::futures::OwnedNotified;
use tokio::sync::{oneshot, Notify};

mod seat;

pub(crate) use seat::{Inheritance, Seat, Succession};

use super::live::{Hold, Through};
use super::Shared;
use crate::ids::{IdMap, OwnerId};
use crate::waiters::LockId;

pub(crate) use crate::backend::TOKEN_BLOCK;

/// The default bound on local hand-offs in a row.
pub(crate) const DEFAULT_HANDOFFS: u32 = 8;

/// The cohorts of one manager, by lock.
#[derive(Debug)]
pub(crate) struct Cohorts {
    table: Mutex<Table>,
    /// Local hand-offs in a row before the hold goes back to the backend (0: no cohorting).
    pub(crate) bound: u32,
}

#[derive(Debug, Default)]
struct Table {
    cohorts: IdMap<LockId, Cohort>,
    /// Set by the shutdown: nobody enters any more.
    closed: bool,
}

/// The requests of this process for one lock.
#[derive(Debug)]
struct Cohort {
    /// The request that holds the lock (or leads: takes it in the backend), with its re-entries;
    /// `None` while the hold goes back to the backend.
    holder: Option<(OwnerId, u32)>,
    /// The backend's hold the cohort's requests share, once the leader took it.
    held: Option<Hold>,
    /// The last token handed out under `held`.
    last_token: u64,
    /// Local hand-offs since the leader took the lock.
    handoffs: u32,
    /// The manager's count of connection troubles (`WaitRegistry::wake_alls`) when the leader
    /// began to take the lock. Once it moved, the server may have restarted and forgotten the
    /// hold: it is not handed on, but goes back to the backend, which knows.
    connections: u64,
    /// The requests waiting, in arrival order.
    waiting: VecDeque<(OwnerId, oneshot::Sender<Turn>)>,
    /// Told when the leader took the lock or gave up (a second request of its owner waits).
    settled: Arc<Notify>,
}

/// What a request entering a cohort is to do.
#[derive(Debug)]
pub(crate) enum Enter {
    /// Nobody of this process holds or waits: take the lock in the backend, as the leader. A
    /// hold whose lease was lost comes with it, to give back to the backend: its requests' guards
    /// are lost, and are no longer the cohort's.
    Lead(Seat, Option<Hold>),
    /// The owner holds the lock already: a re-entry, under the hold and token given.
    Reentered(Hold, u64),
    /// Another request of this process holds the lock: wait for a turn.
    Queued(oneshot::Receiver<Turn>),
    /// Another request holds it, and this one does not wait.
    Busy,
    /// Another request of the same owner leads: enter again once it is settled (this resolves).
    AfterLeader(OwnedNotified),
    /// The manager shut down.
    Closed,
}

/// A waiting request's turn.
#[derive(Debug)]
pub(crate) enum Turn {
    /// The lock is this request's: the backend's hold of the cohort, under a token of its own.
    Inherit(Inheritance),
    /// The lock went back to the backend: take it there, as the leader.
    Lead(Seat),
    /// The leader's attempt failed (the backend is unreachable, or refused the request): ask the
    /// backend alone, outside the cohort, so that each request learns its own answer within its
    /// own wait instead of one after another.
    Alone,
}

/// What releasing a hold of a cohort asks of the caller.
#[derive(Debug)]
pub(crate) enum Released {
    /// Nothing: the owner holds it still, or the next request inherited it.
    Kept,
    /// Release the backend's hold, then let the succession run (drop it).
    ToBackend(Hold, Succession),
    /// The hold was not the cohort's holder's (the shutdown took it).
    NotHeld,
}

impl Cohorts {
    pub(crate) fn new(bound: u32) -> Self {
        Cohorts {
            table: Mutex::default(),
            bound,
        }
    }

    fn table(&self) -> MutexGuard<'_, Table> {
        // every operation leaves the table consistent before it could panic
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Enter the cohort of `id` as a request of `owner` (`wait`: it may wait for a turn).
    pub(crate) fn enter(self: &Arc<Self>, id: &LockId, owner: &OwnerId, wait: bool) -> Enter {
        let mut table = self.table();
        if table.closed {
            return Enter::Closed;
        }
        let lost = (table.cohorts.get(id))
            .is_some_and(|c| c.held.as_ref().is_some_and(|h| h.lost.is_lost()));
        let Some(cohort) = table.cohorts.get_mut(id).filter(|_| !lost) else {
            // a new cohort, or one whose lease was lost: the waiting requests stay, behind
            // this one, which leads
            let mut cohort = Cohort::led_by(owner);
            let lost = table.cohorts.remove(id).and_then(|old| {
                cohort.waiting = old.waiting;
                old.settled.notify_waiters();
                old.held
            });
            table.cohorts.insert(id.clone(), cohort);
            return Enter::Lead(self.seat(id), lost);
        };
        if let Some(entered) = cohort.reenter(owner) {
            return entered;
        }
        if !wait {
            if cohort.holder.is_some() {
                return Enter::Busy;
            }
            // the cohort's hold is going back to the backend: this request asks the backend
            // itself, once, as the leader (it tells whether the lock is busy, or the backend down)
            cohort.holder = Some((owner.clone(), 1));
            return Enter::Lead(self.seat(id), None);
        }
        let (turn, next) = oneshot::channel();
        cohort.waiting.retain(|(_, turn)| !turn.is_closed());
        cohort.waiting.push_back((owner.clone(), turn));
        Enter::Queued(next)
    }

    /// A re-entry of `owner`, when it holds `id` through its cohort: the hold and token.
    pub(crate) fn reenter(&self, id: &LockId, owner: &OwnerId) -> Option<(Hold, u64)> {
        let mut table = self.table();
        match table.cohorts.get_mut(id)?.reenter(owner)? {
            Enter::Reentered(hold, token) => Some((hold, token)),
            _ => None,
        }
    }

    /// The hold `hold` of the cohort's holder is released: hand the lock to the next request
    /// waiting, or give it back to the backend.
    pub(crate) fn release(self: &Arc<Self>, hold: &Hold, shared: &Arc<Shared>) -> Released {
        let mut table = self.table();
        let closed = table.closed;
        let Some(cohort) = table.cohorts.get_mut(&hold.id) else {
            return Released::NotHeld;
        };
        // the hold is this cohort's (not a lost one's, whose lock was taken anew), and its
        // request's
        let ours =
            (cohort.held.as_ref()).is_some_and(|h| h.owner == hold.owner && h.token == hold.token);
        let Some((holder, count)) = cohort.holder.as_mut().filter(|_| ours) else {
            return Released::NotHeld;
        };
        if !matches!(&hold.through, Through::Cohort(request) if request == holder) {
            return Released::NotHeld;
        }
        if *count > 1 {
            *count -= 1;
            return Released::Kept;
        }
        if !closed && cohort.hand_off(shared, self.bound) {
            return Released::Kept;
        }
        cohort.holder = None;
        cohort.handoffs = 0;
        match cohort.held.take() {
            Some(held) => Released::ToBackend(held, self.succession(&hold.id)),
            None => Released::NotHeld,
        }
    }

    /// Shut down: nobody enters any more, and every waiting request is told (its turn never
    /// comes: the channel closes).
    pub(crate) fn close(&self) {
        let mut table = self.table();
        table.closed = true;
        for cohort in table.cohorts.values_mut() {
            cohort.waiting.clear();
        }
    }

    /// Requests waiting in every cohort for their turn.
    pub(crate) fn waiting(&self) -> usize {
        let table = self.table();
        let waiting = table.cohorts.values().flat_map(|c| c.waiting.iter());
        waiting.filter(|(_, turn)| !turn.is_closed()).count()
    }

    fn seat(self: &Arc<Self>, id: &LockId) -> Seat {
        Seat {
            cohorts: self.clone(),
            id: id.clone(),
            armed: true,
        }
    }

    fn succession(self: &Arc<Self>, id: &LockId) -> Succession {
        Succession {
            cohorts: self.clone(),
            id: id.clone(),
        }
    }

    /// Nobody holds `id` in the backend for the cohort now: the next request waiting leads, or
    /// the cohort goes.
    fn succeed(self: &Arc<Self>, id: &LockId) {
        let mut table = self.table();
        let Some(cohort) = table.cohorts.get_mut(id) else {
            return;
        };
        cohort.settled.notify_waiters();
        if cohort.holder.is_some() {
            // a request that does not wait leads already; it passes the lead on when done
            return;
        }
        while let Some((owner, turn)) = cohort.waiting.pop_front() {
            cohort.holder = Some((owner, 1));
            match turn.send(Turn::Lead(self.seat(id))) {
                Ok(()) => return,
                Err(unsent) => unsent.disarm(),
            }
        }
        table.cohorts.remove(id);
    }

    /// The leader took the lock: `hold` is the cohort's, under its token; `connections` as the
    /// leader found them when it began.
    fn establish(&self, id: &LockId, hold: Hold, connections: u64) {
        let mut table = self.table();
        if let Some(cohort) = table.cohorts.get_mut(id) {
            cohort.last_token = hold.token;
            cohort.handoffs = 0;
            cohort.connections = connections;
            cohort.held = Some(hold);
            cohort.settled.notify_waiters();
        }
    }
}

impl Cohort {
    fn led_by(owner: &OwnerId) -> Self {
        Cohort {
            holder: Some((owner.clone(), 1)),
            held: None,
            last_token: 0,
            handoffs: 0,
            connections: 0,
            waiting: VecDeque::new(),
            settled: Arc::default(),
        }
    }

    /// `owner`'s entry when it holds the lock (a re-entry) or leads (enter again later).
    fn reenter(&mut self, owner: &OwnerId) -> Option<Enter> {
        let (holder, count) = self.holder.as_mut()?;
        if holder != owner {
            return None;
        }
        let Some(held) = &self.held else {
            // made under the table's lock: the leader cannot settle before it listens
            return Some(Enter::AfterLeader(self.settled.clone().notified_owned()));
        };
        if held.lost.is_lost() {
            // not a re-entry: the lease of the hold is lost; the lock must be taken anew
            return None;
        }
        *count += 1;
        Some(Enter::Reentered(held.for_request(owner), self.last_token))
    }

    /// Hand the lock to the first request still waiting, if the bound and the lease allow, and
    /// no connection dropped since the leader took the lock.
    fn hand_off(&mut self, shared: &Arc<Shared>, bound: u32) -> bool {
        let Some(held) = &self.held else {
            return false;
        };
        if shared.waiters.wake_alls() != self.connections {
            return false;
        }
        while self.handoffs < bound && !held.lost.is_lost() {
            let Some((owner, turn)) = self.waiting.pop_front() else {
                return false;
            };
            let token = self.last_token + 1;
            let inheritance = Inheritance {
                shared: shared.clone(),
                hold: Some(held.for_request(&owner)),
                token,
            };
            match turn.send(Turn::Inherit(inheritance)) {
                Ok(()) => {
                    self.handoffs += 1;
                    self.last_token = token;
                    self.holder = Some((owner, 1));
                    return true;
                }
                Err(unsent) => unsent.disarm(),
            }
        }
        false
    }
}
