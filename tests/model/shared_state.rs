//! The shared locks' model state: the keys of one read/write lock or semaphore on one server
//! (the hash, the holders' zset, the queue, the heartbeats, the fencing counter), the client
//! processes with their read groups, and ghost fields the properties read.

use crate::state::{Client, Time, Waiter};
use std::collections::BTreeMap;

/// What a hold or a wait is for: the last letter of a shared waiter's id.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// 'r': beside other reads.
    Read,
    /// 'w': alone.
    Write,
    /// 'n': one of the semaphore's permits.
    Permit,
}

/// The family of the lock (`#s`): one per check.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Family {
    ReadWrite,
    /// A semaphore of this many permits.
    Semaphore(u8),
}

/// One owner's fields of the hash: `<owner>` (its re-entries), `#t:<owner>`, `#g:<owner>`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Entry {
    pub count: u8,
    pub token: u64,
    /// A grant to this wait, not yet taken up.
    pub grant: Option<Waiter>,
}

/// The lock hash (`#s` is always set while it exists).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SharedHash {
    pub entries: BTreeMap<Client, Entry>,
    /// `#x`: the write holder.
    pub writer: Option<Client>,
    /// `None`: a key without an expiry.
    pub expires: Option<Time>,
    /// Ghost: brought back by a restart from a snapshot.
    pub restored: bool,
}

/// The keys of one shared lock on one server.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct SharedServer {
    pub hash: Option<SharedHash>,
    /// `<lock>:s`: each holder's lease end; the key's expiry (meaningless while empty).
    pub holders: BTreeMap<Client, Time>,
    pub holders_expires: Option<Time>,
    /// `<lock>:qs`, its waiters in order, and the key's expiry.
    pub queue: Vec<(Waiter, Kind)>,
    pub queue_expires: Time,
    /// Heartbeat keys -> expiry.
    pub heartbeats: BTreeMap<Waiter, Time>,
    /// The fencing counter `:f`.
    pub fence: Option<u64>,
}

impl SharedServer {
    /// Drops every key whose expiry is not after `now`.
    pub fn expire(&mut self, now: Time) {
        if self
            .hash
            .as_ref()
            .is_some_and(|h| h.expires.is_some_and(|e| e <= now))
        {
            self.hash = None;
        }
        if self.holders_expires.is_some_and(|e| e <= now) {
            self.holders.clear();
        }
        if self.holders.is_empty() {
            self.holders_expires = None;
        }
        if self.queue_expires <= now {
            self.queue.clear();
        }
        if self.queue.is_empty() {
            self.queue_expires = 0;
        }
        self.heartbeats.retain(|_, e| *e > now);
    }

    /// Whether a key of this server lives for ever.
    pub fn key_without_expiry(&self) -> bool {
        let hash = self.hash.as_ref().is_some_and(|h| h.expires.is_none());
        hash || (!self.holders.is_empty() && self.holders_expires.is_none())
    }
}

/// What a process's one request is doing.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum SharedPhase {
    Idle,
    /// Waiting as `waiter`; `queued`: an attempt joined the queue already.
    Waiting {
        kind: Kind,
        waiter: Waiter,
        queued: bool,
    },
}

/// A request holding through a process's hold: the leader's, or a read group's member's.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Member {
    /// Its fencing token: the hold's, or the next of the hold's block.
    pub fence: u64,
    /// A restart with loss took the hold from the server before this member's `lost()` fired.
    pub forgotten: bool,
}

/// A process's hold in the backend, and the requests holding through it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SharedHold {
    pub token: u64,
    pub kind: Kind,
    pub members: Vec<Member>,
    /// The last token handed out of the hold's block.
    pub last: u64,
}

/// A client process.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SharedProc {
    pub alive: bool,
    pub phase: SharedPhase,
    pub hold: Option<SharedHold>,
    /// When the hold's `lost()` fires, in server time.
    pub deadline: Time,
    /// The server answered a call with this hold since the clock last advanced.
    pub proven: bool,
    /// Releases of holds whose `lost()` fired, not yet run.
    pub late_releases: Vec<u64>,
    /// Grant messages not yet read: the wait and its token.
    pub inbox: Vec<(Waiter, u64)>,
    /// A script answered 'more': this manager owes a `grant_on` call.
    pub grant_on: bool,
    pub next_wait: u8,
    pub budget: u8,
}

/// What happened, for the properties.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct SharedGhost {
    /// The highest token of any acquisition, and of a write.
    pub max_token: u64,
    pub max_write: u64,
    /// An acquisition got a token not above an earlier one it must be above.
    pub token_regressed: bool,
    /// A release or renewal changed a hold it did not make.
    pub touched_foreign: bool,
}

/// The whole state of the shared locks' model.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SharedState {
    pub now: Time,
    pub server: SharedServer,
    pub snapshot: Option<SharedServer>,
    pub restarts: u8,
    pub procs: Vec<SharedProc>,
    pub ghost: SharedGhost,
}
