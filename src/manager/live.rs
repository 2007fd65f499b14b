//! The holds of a manager's live guards, so that a shutdown can release the ones still held.
//!
//! A guard and the shutdown both take its hold out of the table; whichever comes first releases
//! it, and the other finds it gone (a guard then reports `NotHeld`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::backend::LockParty;
use crate::ids::{IdMap, OwnerId};
use crate::lease::LostSignal;
use crate::options::Mode;
use crate::telemetry;
use crate::waiters::LockId;
use crate::watchdog::FixedHolds;

/// One hold of a lock by one owner: what releasing it needs.
#[derive(Debug, Clone)]
pub(crate) struct Hold {
    /// The lock name, as given.
    pub(crate) key: Arc<str>,
    pub(crate) id: LockId,
    pub(crate) owner: OwnerId,
    /// The hold's fencing token: the release of a lost hold reaches only the holds made under it
    /// (not a later acquisition of the same owner, after this one's lease was lost).
    pub(crate) token: u64,
    /// Kept by the watchdog (else a fixed lease).
    pub(crate) watched: bool,
    /// The guard's lost signal: which watchdog lease it counts on.
    pub(crate) lost: Arc<LostSignal>,
    pub(crate) mode: Mode,
    /// Whether the request holds the backend's hold itself, or shares it.
    pub(crate) through: Through,
}

/// How a request holds the backend's hold of its lock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Through {
    /// Itself: the hold's owner is the request's.
    Backend,
    /// Through its cohort (see `cohort.rs`), for the request of this owner. The hold's `owner` is
    /// then the cohort's, shared by the requests that hold the lock in turn.
    Cohort(OwnerId),
    /// As a member of a read group (see `read_group.rs`): the group's number and the member
    /// request's owner. The hold's `owner` is the group's, shared by its members at once.
    ReadGroup(u64, OwnerId),
}

impl Hold {
    /// This hold of a cohort, held for the request of `owner`.
    pub(crate) fn for_request(&self, owner: &OwnerId) -> Hold {
        self.through(Through::Cohort(owner.clone()))
    }

    /// This hold, held as `through` says.
    pub(crate) fn through(&self, through: Through) -> Hold {
        Hold {
            through,
            ..self.clone()
        }
    }
}

/// What lists the holds of `live` with a fixed lease, for the watchdog.
pub(super) fn fixed_holds(live: &Arc<LiveHolds>) -> FixedHolds {
    let live = live.clone();
    FixedHolds(Box::new(move || live.fixed()))
}

/// The holds of the live guards, by a number of their own.
#[derive(Debug, Default)]
pub(crate) struct LiveHolds {
    next: AtomicU64,
    table: Mutex<Table>,
}

#[derive(Debug, Default)]
struct Table {
    holds: IdMap<u64, Hold>,
    /// How many holds each owner has of each lock in the backend itself (not shared), and the
    /// token of the latest.
    direct: IdMap<(LockId, OwnerId), Direct>,
}

/// An owner's holds of a lock in the backend itself.
#[derive(Debug, Default)]
struct Direct {
    count: u32,
    token: u64,
}

impl Table {
    fn count_direct(&mut self, hold: &Hold, up: bool) {
        if hold.through != Through::Backend {
            return;
        }
        let key = (hold.id.clone(), hold.owner.clone());
        let direct = self.direct.entry(key.clone()).or_default();
        if up {
            let replaced = direct.count > 0 && direct.token != hold.token;
            direct.count += 1;
            direct.token = hold.token;
            if replaced {
                self.replaced(hold);
            }
        } else {
            direct.count = direct.count.saturating_sub(1);
            if direct.count == 0 {
                self.direct.remove(&key);
            }
        }
    }

    /// The backend answered an attempt of `hold`'s owner with a new token while the owner held
    /// the lock under another: the backend's hold was not that one (a restart brought back an
    /// older hold of the owner), and the attempt replaced it. The owner's holds under other
    /// tokens are lost: the backend has nothing of them.
    fn replaced(&self, hold: &Hold) {
        let earlier = self.holds.values().filter(|earlier| {
            earlier.through == Through::Backend
                && earlier.id == hold.id
                && earlier.owner == hold.owner
                && earlier.token != hold.token
        });
        earlier.for_each(|earlier| earlier.lost.fire());
    }
}

impl LiveHolds {
    fn table(&self) -> MutexGuard<'_, Table> {
        // every operation leaves the table consistent before it could panic
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Keep `hold`; its number takes it out again.
    pub(crate) fn insert(&self, hold: Hold) -> u64 {
        let number = self.next.fetch_add(1, Ordering::Relaxed);
        let mut table = self.table();
        table.count_direct(&hold, true);
        table.holds.insert(number, hold);
        telemetry::hold(true);
        number
    }

    /// Take the hold `number` out, unless the shutdown took it first.
    pub(crate) fn take(&self, number: u64) -> Option<Hold> {
        let mut table = self.table();
        let hold = table.holds.remove(&number);
        if let Some(hold) = &hold {
            table.count_direct(hold, false);
            telemetry::hold(false);
        }
        hold
    }

    /// Whether `owner` holds `id` in the backend itself (not shared): its re-entries go there
    /// too.
    pub(crate) fn holds_directly(&self, id: &LockId, owner: &OwnerId) -> bool {
        let table = self.table();
        table.direct.contains_key(&(id.clone(), owner.clone()))
    }

    /// The token under which `owner` holds `id` in the backend itself, if it does: the hold its
    /// re-entries must find there.
    pub(crate) fn held_token(&self, id: &LockId, owner: &OwnerId) -> Option<u64> {
        let table = self.table();
        let direct = table.direct.get(&(id.clone(), owner.clone()));
        direct.map(|direct| direct.token)
    }

    /// Make the hold `number` a shared one, held as `through` says; the backend's hold is
    /// returned.
    pub(crate) fn adopt(&self, number: u64, through: Through) -> Option<Hold> {
        let mut table = self.table();
        let hold = table.holds.get(&number)?.clone();
        table.count_direct(&hold, false);
        if let Some(live) = table.holds.get_mut(&number) {
            live.through = through;
        }
        Some(hold)
    }

    /// The backend answered the release of `released` with "freed": it had no other hold of that
    /// owner under that token. The owner's other holds of the lock under that token (its
    /// re-entries) are lost: a restart lost part of the hold (an AOF cut back past a re-entry),
    /// and the lock may be taken by anyone now. Their lost signals fire at once, not at the next
    /// renewal.
    pub(crate) fn freed(&self, released: &Hold) {
        let table = self.table();
        let orphans = table.holds.values().filter(|other| {
            other.through == Through::Backend
                && other.id == released.id
                && other.owner == released.owner
                && other.token == released.token
        });
        orphans.for_each(|orphan| orphan.lost.fire());
    }

    /// The backend's holds with a fixed lease (not kept by the watchdog), once each, with their
    /// lost signals: renewals that change no lease still delete their takeover marks.
    pub(crate) fn fixed(&self) -> Vec<(LockParty, Arc<LostSignal>)> {
        let table = self.table();
        let fixed =
            (table.holds.values()).filter(|hold| !hold.watched && hold.through == Through::Backend);
        let party = |hold: &Hold| LockParty {
            id: hold.id.clone(),
            owner: hold.owner.as_arc().clone(),
        };
        fixed.map(|hold| (party(hold), hold.lost.clone())).collect()
    }

    /// Take every hold out.
    pub(crate) fn take_all(&self) -> Vec<Hold> {
        let mut table = self.table();
        table.direct.clear();
        let holds: Vec<Hold> = table.holds.drain().map(|(_, hold)| hold).collect();
        holds.iter().for_each(|_| telemetry::hold(false));
        holds
    }
}
