//! The requests of a manager queued for fair locks, which the watchdog heartbeats.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};
use std::time::Instant;

use crate::backend::LockParty;

/// The requests of this manager queued for fair locks, by (lock, owner).
#[derive(Debug, Default)]
pub(crate) struct Queued {
    table: Mutex<HashMap<LockParty, QueuedWaiter>>,
}

#[derive(Debug, Default)]
struct QueuedWaiter {
    requests: usize,
    /// The start of the last heartbeat round that found the waiter still queued behind a holder:
    /// a grant made to it came later.
    confirmed: Option<Instant>,
}

impl Queued {
    fn table(&self) -> MutexGuard<'_, HashMap<LockParty, QueuedWaiter>> {
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `waiter` joined its lock's queue: heartbeat it until [`Queued::remove`].
    pub(crate) fn add(&self, waiter: &LockParty) {
        self.table().entry(waiter.clone()).or_default().requests += 1;
    }

    pub(crate) fn remove(&self, waiter: &LockParty) {
        let mut table = self.table();
        if let Some(entry) = table.get_mut(waiter) {
            entry.requests -= 1;
            if entry.requests == 0 {
                table.remove(waiter);
            }
        }
    }

    /// When `waiter` was last known to be queued, not yet granted (see [`QueuedWaiter`]).
    pub(crate) fn confirmed(&self, waiter: &LockParty) -> Option<Instant> {
        self.table().get(waiter).and_then(|entry| entry.confirmed)
    }

    pub(super) fn confirm(&self, waiter: &LockParty, at: Instant) {
        if let Some(entry) = self.table().get_mut(waiter) {
            entry.confirmed = Some(at);
        }
    }

    pub(super) fn snapshot(&self) -> Vec<LockParty> {
        self.table().keys().cloned().collect()
    }

    /// Number of queued requests (for tests and metrics).
    pub(crate) fn len(&self) -> usize {
        self.table().values().map(|entry| entry.requests).sum()
    }
}
