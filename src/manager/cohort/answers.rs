//! What a cohort answers a request: on entering ([`Enter`]), when its turn comes ([`Turn`]),
//! and on releasing ([`Released`]).

use tokio::sync::futures::OwnedNotified;
use tokio::sync::oneshot;

use super::{Inheritance, Seat, Succession};
use crate::ids::OwnerId;
use crate::manager::live::Hold;

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
    /// Another request of this process holds the lock, or leads, under `leader` in the backend,
    /// and the request keeps FIFO order: it waits for `turn` ([`super::Cohorts::admit`], by `ticket`)
    /// only if nobody but the leader waits for the lock in the backend. Its place in line is
    /// kept while it asks: a turn that comes meanwhile waits for the answer.
    Ask {
        leader: OwnerId,
        ticket: u64,
        turn: oneshot::Receiver<Turn>,
    },
    /// The request keeps FIFO order, and others wait for the lock in the backend (or the backend
    /// could not be read): it asks the backend itself, and queues there.
    Alone,
    /// Another request holds it, and this one does not wait.
    Busy,
    /// Another request of the same owner leads, or (keeping FIFO order) the cohort's hold is
    /// about to be taken or given back: enter again once it is settled, or a new leader begins
    /// (this resolves).
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
    /// Release the backend's hold, under which the token given was the last handed out, then let
    /// the succession run (drop it).
    ToBackend(Hold, u64, Succession),
    /// The hold was not the cohort's holder's (the shutdown took it).
    NotHeld,
    /// A request waits for the hold, but the server's last word on it is not recent: confirm the
    /// hold given (the cohort's), then release again, without asking for a confirmation.
    Confirm(Hold),
}
