//! `WaitTicket`: a waiting request's place among the local waiters of one lock, and what its
//! leaving asks of the backend (leave a fair queue, pass on a wake-up or a grant it did not use).

use std::sync::Arc;
use std::time::Instant;

use super::Shared;
use crate::backend::{shared_kind_of, LockParty};
use crate::ids::OwnerId;
use crate::options::Mode;
use crate::waiters::{LockId, WaitStart, Waiter};

/// A request's place among the local waiters of one lock, for as long as it waits.
pub(super) struct WaitTicket {
    shared: Arc<Shared>,
    id: LockId,
    owner: OwnerId,
    mode: Mode,
    waiter: Arc<Waiter>,
    /// An attempt found the lock busy: the backend recorded this request as waiting (fair mode:
    /// it joined the lock's queue, and the watchdog heartbeats it).
    found_busy: bool,
    /// The request took the lock: its leaving asks nothing of the backend.
    acquired: bool,
}

impl WaitTicket {
    /// Join the local waiters of `id`, as a request in `mode` that began `since`. Another
    /// request of the same owner waiting for it goes first: this one waits (at most until
    /// `deadline`) for that one to be done, then re-enters the lock that one took, or waits
    /// afresh. A lock's queue and its grants know owners, so two requests of one owner queued at
    /// once could take one grant for two holds.
    pub(super) async fn new(
        shared: &Arc<Shared>,
        id: &LockId,
        owner: &OwnerId,
        (mode, since): (Mode, Instant),
        deadline: Option<Instant>,
    ) -> Option<Self> {
        let wait = WaitStart { mode, since };
        loop {
            match shared
                .waiters
                .register(id, owner, shared_kind_of(mode), wait)
            {
                Ok(waiter) => {
                    if mode.is_queued() {
                        waiter.join_queue();
                    }
                    return Some(WaitTicket {
                        shared: shared.clone(),
                        id: id.clone(),
                        owner: owner.clone(),
                        mode,
                        waiter,
                        found_busy: false,
                        acquired: false,
                    });
                }
                Err(sibling) => match deadline {
                    Some(deadline) => {
                        tokio::time::timeout_at(deadline.into(), sibling.departed())
                            .await
                            .ok()?;
                    }
                    None => sibling.departed().await,
                },
            }
        }
    }

    /// This wait's name (see [`Waiter::name`]).
    pub(super) fn name(&self) -> &Arc<str> {
        self.waiter.name()
    }

    /// The token of a fair grant made to this wait, if one arrived.
    pub(super) fn grant(&self) -> Option<u64> {
        self.waiter.grant()
    }

    /// Forget a grant that may be stale: an attempt will check it.
    pub(super) fn forget_grant(&self) {
        self.waiter.forget_grant();
    }

    /// Resolves after a wake-up (at once when one arrived since the last call).
    pub(super) async fn woken(&self) {
        self.waiter.woken().await
    }

    /// Pass the last wake-up on when this request leaves without the lock.
    pub(super) fn keep_wake(&self) {
        self.waiter.keep_wake();
    }

    /// The request took the lock (by an attempt or a grant).
    pub(super) fn acquired(&mut self) {
        self.acquired = true;
    }

    /// Whether an attempt found the lock busy (the backend records this request as waiting).
    pub(super) fn is_queued(&self) -> bool {
        self.found_busy
    }

    /// Whether other local requests wait for the lock.
    pub(super) fn others_waiting(&self) -> bool {
        self.shared.waiters.has_others(&self.id)
    }

    /// The (lock, waiter) pair this request is queued as in fair mode (see [`LockParty`]).
    pub(super) fn as_queued(&self) -> LockParty {
        LockParty {
            id: self.id.clone(),
            owner: self.waiter.name().clone(),
        }
    }

    /// The (lock, owner) pair of a grant this request takes.
    pub(super) fn as_held(&self) -> LockParty {
        LockParty {
            id: self.id.clone(),
            owner: self.owner.as_arc().clone(),
        }
    }

    /// A request of exclusive mode waits on as a fair one: in the lock's queue, from its next
    /// attempt on (nothing of its exclusive wait is kept in the backend's queue).
    pub(super) fn wait_in_fair_queue(&mut self) {
        self.mode = Mode::Fair;
        self.found_busy = false;
        self.waiter.join_queue();
    }

    /// An attempt found the lock busy. Fair mode: the request is in the lock's queue now; keep it
    /// alive there.
    pub(super) fn found_busy(&mut self) {
        if !self.found_busy {
            self.found_busy = true;
            if self.mode.is_queued() {
                self.shared.queued.add(&self.as_queued());
            }
        }
    }
}

impl Drop for WaitTicket {
    fn drop(&mut self) {
        if self.found_busy && self.mode.is_queued() {
            self.shared.queued.remove(&self.as_queued());
        }
        let departure = self
            .shared
            .waiters
            .leave(&self.id, &self.waiter, self.acquired);
        if self.acquired {
            // The acquire script (or the grant) already updated the backend's records.
            return;
        }
        let backend = self.shared.backend.clone();
        let id = self.id.clone();
        if self.mode.is_queued() {
            // Leave the queue at once. A grant made to this wait goes to the next waiter here
            // (Redis knows it by the wait's name; memory by the token of the grant we received);
            // one whose message comes later finds no waiter and is passed on by the inbox. Only a
            // grant to this very wait is released: the owner may hold the lock through another
            // guard (a re-entry that failed never queued), and that hold must stay.
            let (waiter, mode) = (self.waiter.name().clone(), self.mode);
            let grant = self.waiter.grant();
            self.shared.background.finish(async move {
                if let Err(err) = backend.leave_queue(&id, &waiter, mode, grant).await {
                    tracing::debug!(error = %err, "could not leave a fair queue");
                }
            });
            return;
        }
        if !(departure.last || departure.pass_on) {
            return;
        }
        let waiters = self.shared.waiters.clone();
        self.shared.background.finish(async move {
            if let Err(err) = backend.abandon(&id, departure).await {
                tracing::debug!(error = %err, "could not withdraw a waiter");
            }
            if departure.last {
                // A request of this process that began to wait after this one left may have had
                // its record in Redis withdrawn by this call: it checks again, and records itself.
                waiters.wake_one(&id);
            }
        });
    }
}
