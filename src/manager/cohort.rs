//! Lock cohorting (Dice, Marathe and Shavit, "Lock Cohorting", PPoPP 2012): the exclusive
//! requests of this process for one lock queue here, in memory, in front of the backend. One of
//! them, the cohort's leader, takes the lock in the backend under an owner id of its own. When the
//! request holding it releases while others of this process wait, the next one inherits the
//! backend's hold at once — no round trip — up to a bound of hand-offs; then the hold is released
//! in the backend, so that other processes get their turn, and the next local request leads anew.
//!
//! Fair requests keep FIFO order across processes. One that finds the lock held or led by a
//! request of this process asks the backend whether anybody but the cohort's leader waits for it
//! there (two reads, no script), and waits in the cohort only if nobody does; else it queues in
//! the backend. Waiting in the cohort, it takes the leader's place in the backend's order: whoever
//! queues there after the leader comes after it. It takes its place in the cohort's line as it
//! asks: a hand-off that reaches it first waits for the answer (one round trip), so a chain of
//! hand-offs does not end because the next request was still asking. Should others wait in the
//! backend, it passes the hand-off on and queues there. (One that comes while the hold is being given
//! back, or before a new leader began, waits for the leader, then asks.) So hand-offs in memory
//! keep the order, and do not count against the bound: a chain ends when nobody of this process
//! waits, or when the block of tokens runs out. Should the leader give up its wait, or a hold be
//! lost, the requests waiting behind it lead anew, and queue behind whoever queued meanwhile. Fair
//! requests that opt in to cohort order wait in the cohort at once, as exclusive ones do.
//!
//! Every inherited hold gets the next token of the block the backend reserved when the leader
//! took the lock (`TOKEN_BLOCK` in `common.lua`): tokens still rise strictly across local and
//! remote hand-offs. The leader's lease (renewed by the watchdog) and its lost signal serve every
//! request of the cohort: each inherits the same signal, so `lost()` fires for whoever holds.

use std::collections::VecDeque;
use std::sync::Arc;

use tokio::sync::{oneshot, Notify};

mod answers;
mod hand_off;
mod loss;
mod seat;
mod waits;

pub(crate) use answers::{Enter, Released, Turn};
pub(crate) use hand_off::proven;
use hand_off::HandOff;
pub(crate) use seat::{Inheritance, Seat, Succession};

use super::live::{Hold, Through};
use super::Shared;
use crate::ids::{IdMap, OwnerId};
use crate::sync::{Mutex, MutexGuard};
use crate::waiters::{LockId, WaitStart};

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
    /// The last ticket given to a request asking the backend ([`Enter::Ask`]).
    last_ticket: u64,
}

/// The requests of this process for one lock.
#[derive(Debug)]
struct Cohort {
    /// The request that holds the lock (or leads: takes it in the backend), with its re-entries;
    /// `None` while the hold goes back to the backend.
    holder: Option<(OwnerId, u32)>,
    /// The owner id the leader takes the lock under in the backend, once it began to.
    leader: Option<OwnerId>,
    /// The backend's hold the cohort's requests share, once the leader took it.
    held: Option<Hold>,
    /// The last token handed out under `held`.
    last_token: u64,
    /// Local hand-offs since the leader took the lock.
    handoffs: u32,
    /// The manager's count of connection troubles (`WaitRegistry::wake_alls`) when the leader
    /// began to take the lock. Once it moved, the server may have restarted and forgotten the
    /// hold: it is not handed on, but goes back to the backend, which knows. (A drop may also go
    /// unseen: a hand-off also needs a recent proof of the hold, `hand_off.rs`.)
    connections: u64,
    /// Dropped when `held` leaves the cohort: stops the task that watches its lease
    /// (`loss.rs`).
    watch: Option<oneshot::Sender<()>>,
    /// The requests waiting, in arrival order.
    waiting: VecDeque<Waiting>,
    /// Told when a leader begins, takes the lock or gives up (a second request of its owner, or
    /// requests keeping FIFO order, wait for it).
    settled: Arc<Notify>,
}

/// A request waiting in a cohort for its turn.
#[derive(Debug)]
struct Waiting {
    owner: OwnerId,
    turn: oneshot::Sender<Turn>,
    /// Its hand-off counts against the bound: it may be served before requests of other
    /// processes that queued first (exclusive, or fair in cohort order).
    bounded: bool,
    /// The ticket of a request keeping FIFO order while it asks the backend whether it may wait
    /// here ([`Enter::Ask`]); `None` once it may.
    asking: Option<u64>,
    /// Its mode, and when its acquisition began.
    wait: WaitStart,
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

    /// Enter the cohort of `id` as a request of `owner` (`wait`: it may wait for a turn; `fifo`:
    /// it keeps FIFO order across processes; `start`: its mode, and when it began).
    pub(crate) fn enter(
        self: &Arc<Self>,
        id: &LockId,
        owner: &OwnerId,
        (wait, fifo): (bool, bool),
        start: WaitStart,
    ) -> Enter {
        let mut guard = self.table();
        let table = &mut *guard;
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
        if !fifo {
            return Enter::Queued(cohort.queue(owner, (true, None), start));
        }
        table.last_ticket += 1;
        cohort.ask(owner, table.last_ticket, start)
    }

    /// Let the request that asked under `ticket` wait in the cohort of `id`: nobody but its
    /// leader waited for the lock in the backend. The answer came while the leader held the
    /// lock, or led: whoever queues in the backend after it comes after this request.
    pub(crate) fn admit(&self, id: &LockId, ticket: u64) {
        let mut table = self.table();
        let Some(cohort) = table.cohorts.get_mut(id) else {
            return;
        };
        let asking = cohort.waiting.iter_mut().find(|w| w.asking == Some(ticket));
        if let Some(waiting) = asking {
            waiting.asking = None;
        }
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
    /// waiting, or give it back to the backend. `may_confirm`: a hand-off whose proof of the hold
    /// is not recent asks for a confirmation first ([`Released::Confirm`]); else it is not made.
    pub(crate) fn release(
        self: &Arc<Self>,
        hold: &Hold,
        shared: &Arc<Shared>,
        may_confirm: bool,
    ) -> Released {
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
        if !closed {
            match cohort.hand_off(shared, self.bound, may_confirm) {
                HandOff::Made => return Released::Kept,
                HandOff::Unproven(held) => return Released::Confirm(held),
                HandOff::None => {}
            }
        }
        cohort.holder = None;
        cohort.leader = None;
        cohort.handoffs = 0;
        cohort.watch = None;
        match cohort.held.take() {
            Some(held) => {
                let last = cohort.last_token.max(held.token);
                Released::ToBackend(held, last, self.succession(&hold.id))
            }
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
        waiting
            .filter(|w| !w.turn.is_closed() && w.asking.is_none())
            .count()
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
        cohort.leader = None;
        while let Some(Waiting { owner, turn, .. }) = cohort.waiting.pop_front() {
            cohort.holder = Some((owner, 1));
            match turn.send(Turn::Lead(self.seat(id))) {
                Ok(()) => return,
                Err(unsent) => unsent.disarm(),
            }
        }
        table.cohorts.remove(id);
    }

    /// The leader of the cohort of `id` takes the lock in the backend under `leader`.
    fn lead_as(&self, id: &LockId, leader: &OwnerId) {
        let mut table = self.table();
        if let Some(cohort) = table.cohorts.get_mut(id) {
            cohort.leader = Some(leader.clone());
            // requests keeping FIFO order waited for a leader to ask about
            cohort.settled.notify_waiters();
        }
    }

    /// The leader took the lock: `hold` is the cohort's, under its token; `connections` as the
    /// leader found them when it began. The receiver resolves once the hold leaves the cohort
    /// (`None`: the cohort is gone).
    fn establish(
        &self,
        id: &LockId,
        hold: Hold,
        connections: u64,
    ) -> Option<oneshot::Receiver<()>> {
        let mut table = self.table();
        let cohort = table.cohorts.get_mut(id)?;
        let (watch, left) = oneshot::channel();
        cohort.last_token = hold.token;
        cohort.handoffs = 0;
        cohort.connections = connections;
        cohort.held = Some(hold);
        cohort.watch = Some(watch);
        cohort.settled.notify_waiters();
        Some(left)
    }
}

impl Cohort {
    fn led_by(owner: &OwnerId) -> Self {
        Cohort {
            holder: Some((owner.clone(), 1)),
            leader: None,
            held: None,
            last_token: 0,
            handoffs: 0,
            connections: 0,
            watch: None,
            waiting: VecDeque::new(),
            settled: Arc::default(),
        }
    }

    /// Put a request of `owner` at the end of the line (`bounded`, `asking`: see [`Waiting`]).
    fn queue(
        &mut self,
        owner: &OwnerId,
        (bounded, asking): (bool, Option<u64>),
        wait: WaitStart,
    ) -> oneshot::Receiver<Turn> {
        let (turn, next) = oneshot::channel();
        self.waiting.retain(|w| !w.turn.is_closed());
        self.waiting.push_back(Waiting {
            owner: owner.clone(),
            turn,
            bounded,
            asking,
            wait,
        });
        next
    }

    /// The entry of a request of `owner` keeping FIFO order, under `ticket`: it asks about the
    /// leader from its place in line ([`Enter::Ask`]), or waits for a leader to ask about.
    fn ask(&mut self, owner: &OwnerId, ticket: u64, start: WaitStart) -> Enter {
        let (Some(_), Some(leader)) = (&self.holder, &self.leader) else {
            // made under the table's lock: the change it waits for cannot come before
            return Enter::AfterLeader(self.settled.clone().notified_owned());
        };
        Enter::Ask {
            leader: leader.clone(),
            ticket,
            turn: self.queue(owner, (false, Some(ticket)), start),
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
}
