//! The handles a cohort gives out: the leader's seat, an inherited hold, and the succession that
//! lets the next request lead once the backend's hold went. Each does its part when dropped, so
//! that a request that goes away (cancelled, timed out) leaves nothing behind.

use std::sync::Arc;

use super::{Cohorts, Turn};
use crate::ids::OwnerId;
use crate::manager::live::Hold;
use crate::manager::Shared;
use crate::waiters::LockId;

/// The leader's place: taken, it makes the cohort's hold ([`Seat::established`]); dropped before
/// that (the attempt failed, timed out or was cancelled), it passes the lead on.
#[derive(Debug)]
pub(crate) struct Seat {
    pub(super) cohorts: Arc<Cohorts>,
    pub(super) id: LockId,
    pub(super) armed: bool,
}

/// An inherited hold. Dropped unused (its request went away), it is released like a hold.
#[derive(Debug)]
pub(crate) struct Inheritance {
    pub(super) shared: Arc<Shared>,
    /// The backend's hold, naming the request that inherits it.
    pub(crate) hold: Option<Hold>,
    pub(crate) token: u64,
}

/// The next request of the cohort leads once this is dropped: after the backend's hold went.
#[derive(Debug)]
pub(crate) struct Succession {
    pub(super) cohorts: Arc<Cohorts>,
    pub(super) id: LockId,
}

impl Turn {
    /// A turn that never reached its request: it must not act as if dropped by one.
    pub(super) fn disarm(self) {
        match self {
            Turn::Inherit(mut inheritance) => drop(inheritance.hold.take()),
            Turn::Lead(mut seat) => seat.armed = false,
            Turn::Alone => {}
        }
    }
}

impl Seat {
    /// The leader begins to take the lock in the backend under `leader`.
    pub(crate) fn leading(&self, leader: &OwnerId) {
        self.cohorts.lead_as(&self.id, leader);
    }

    /// The leader took the lock in the backend: `hold` (its live hold) is the cohort's now.
    /// `connections`: the manager's count of connection troubles when the leader began. The
    /// receiver resolves once the hold leaves the cohort (`None`: the cohort is gone).
    pub(crate) fn established(
        mut self,
        hold: Hold,
        connections: u64,
    ) -> Option<tokio::sync::oneshot::Receiver<()>> {
        self.armed = false;
        self.cohorts.establish(&self.id, hold, connections)
    }

    /// The leader's attempt failed: the cohort ends, and every request waiting in it asks the
    /// backend alone ([`Turn::Alone`]).
    pub(crate) fn disband(mut self) {
        self.armed = false;
        let mut table = self.cohorts.table();
        if let Some(cohort) = table.cohorts.remove(&self.id) {
            cohort.settled.notify_waiters();
            for waiting in cohort.waiting {
                let _ = waiting.turn.send(Turn::Alone);
            }
        }
    }
}

impl Drop for Seat {
    fn drop(&mut self) {
        if self.armed {
            let mut table = self.cohorts.table();
            if let Some(cohort) = table.cohorts.get_mut(&self.id) {
                cohort.holder = None;
                cohort.leader = None;
            }
            drop(table);
            self.cohorts.succeed(&self.id);
        }
    }
}

impl Inheritance {
    /// Take the hold: the request holds the lock now.
    pub(crate) fn take(mut self) -> Option<(Hold, u64)> {
        Some((self.hold.take()?, self.token))
    }
}

impl Drop for Inheritance {
    fn drop(&mut self) {
        // never taken: the request went away after the hand-off; release it as its holder would
        if let Some(hold) = self.hold.take() {
            self.shared.release_in_cohort_background(hold);
        }
    }
}

impl Drop for Succession {
    fn drop(&mut self) {
        self.cohorts.succeed(&self.id);
    }
}
