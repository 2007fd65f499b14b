//! The handles a read group gives out: the leader's seat and a waiting read's membership. Each
//! does its part when dropped, so that a request that goes away leaves nothing behind.

use std::sync::Arc;

use super::{ReadGroups, ReadTurn};
use crate::manager::live::Hold;
use crate::manager::Shared;
use crate::waiters::LockId;

/// The leader's place: taken, it makes the group's hold ([`ReadSeat::established`]); dropped
/// before that, the group ends and its waiting reads enter again.
#[derive(Debug)]
pub(crate) struct ReadSeat {
    pub(super) groups: Arc<ReadGroups>,
    pub(super) id: LockId,
    pub(crate) number: u64,
    pub(super) armed: bool,
}

/// A membership sent to a waiting read. Dropped unused (its request went away), it leaves.
#[derive(Debug)]
pub(crate) struct Membership {
    pub(super) shared: Arc<Shared>,
    pub(super) hold: Option<Hold>,
    pub(super) token: u64,
}

impl ReadSeat {
    /// The leader took the read hold: `hold` (its live hold) is the group's now, and the reads
    /// waiting join it. `connections`: the manager's count of connection troubles when the
    /// leader began.
    pub(crate) fn established(mut self, hold: Hold, connections: u64, shared: &Arc<Shared>) {
        self.armed = false;
        (self.groups).establish(&self.id, self.number, hold, connections, shared);
    }

    /// The leader's attempt failed: the group ends, and every read waiting for it asks the
    /// backend alone.
    pub(crate) fn disband(mut self) {
        self.armed = false;
        (self.groups).end_unheld(&self.id, self.number, || ReadTurn::Alone);
    }
}

impl Drop for ReadSeat {
    fn drop(&mut self) {
        if self.armed {
            (self.groups).end_unheld(&self.id, self.number, || ReadTurn::Again);
        }
    }
}

impl Membership {
    /// Take the membership: the request holds through the group now.
    pub(crate) fn take(mut self) -> Option<(Hold, u64)> {
        Some((self.hold.take()?, self.token))
    }
}

impl Drop for Membership {
    fn drop(&mut self) {
        // never taken: the request went away after it joined; it leaves as a member would
        if let Some(hold) = self.hold.take() {
            self.shared.release_in_read_group_background(hold);
        }
    }
}
