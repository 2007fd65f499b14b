//! The holds of a manager's live guards, so that a shutdown can release the ones still held.
//!
//! A guard and the shutdown both take its hold out of the table; whichever comes first releases
//! it, and the other finds it gone (a guard then reports `NotHeld`).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::ids::OwnerId;
use crate::lease::LostSignal;
use crate::options::Mode;
use crate::telemetry;
use crate::waiters::LockId;

/// One hold of a lock by one owner: what releasing it needs.
#[derive(Debug)]
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
}

/// The holds of the live guards, by a number of their own.
#[derive(Debug, Default)]
pub(crate) struct LiveHolds {
    next: AtomicU64,
    table: Mutex<HashMap<u64, Hold>>,
}

impl LiveHolds {
    fn table(&self) -> MutexGuard<'_, HashMap<u64, Hold>> {
        // every operation leaves the table consistent before it could panic
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Keep `hold`; its number takes it out again.
    pub(crate) fn insert(&self, hold: Hold) -> u64 {
        let number = self.next.fetch_add(1, Ordering::Relaxed);
        self.table().insert(number, hold);
        telemetry::hold(true);
        number
    }

    /// Take the hold `number` out, unless the shutdown took it first.
    pub(crate) fn take(&self, number: u64) -> Option<Hold> {
        let hold = self.table().remove(&number);
        if hold.is_some() {
            telemetry::hold(false);
        }
        hold
    }

    /// Take every hold out.
    pub(crate) fn take_all(&self) -> Vec<Hold> {
        let holds: Vec<Hold> = self.table().drain().map(|(_, hold)| hold).collect();
        holds.iter().for_each(|_| telemetry::hold(false));
        holds
    }
}
