//! The model's state: one Redis server (its keys, each with its expiry in server time), the
//! snapshot a restart may load, the client processes, and ghost fields the properties read.

use std::collections::BTreeMap;

/// Server time in ticks. A tick is far longer than a script call.
pub type Time = u8;

/// A client process, and the owner id of its requests (one owner per process).
pub type Client = u8;

/// One wait of one request of an owner: `(owner, n)`, the script's `'<owner>|<n>'`.
pub type Waiter = (Client, u8);

/// Microseconds per tick: the clock floor of a token is `now * US_PER_TICK`.
pub const US_PER_TICK: u64 = 1000;

/// Tokens reserved with each acquisition (common.lua's `TOKEN_BLOCK`).
pub const TOKEN_BLOCK: u64 = 64;

/// The fair grant's bound on waiters looked at per call (scaled down from 1000).
pub const MAX_LOOKED: u8 = 1;

/// What the lock's `#f` field holds.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum FairMark {
    /// `'1'`: held in fair mode, bound to no wait.
    Any,
    /// A grant to this wait, not yet taken up.
    Wait(Waiter),
}

/// The lock hash: owner -> holds, `#t`, `#w`, `#f`, and the key's expiry.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct LockHash {
    pub holds: BTreeMap<Client, u8>,
    pub token: Option<u64>,
    pub marked: bool,
    pub fair: Option<FairMark>,
    /// `None`: a key without an expiry.
    pub expires: Option<Time>,
    /// Ghost: brought back by a restart from a snapshot (not a Redis field).
    pub restored: bool,
    /// Ghost: when grant_next made the grant `fair` names (server time).
    pub granted: Option<Time>,
}

/// The lock as a string (the plain path): its value names the owner, the mode ('!' for fair)
/// and the hold (the model's token stands for the hold's number; the server never sees it).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PlainLock {
    pub owner: Client,
    pub fair: bool,
    pub hold: u64,
    pub expires: Time,
    /// Ghost: brought back by a restart from a snapshot.
    pub restored: bool,
}

/// The keys of one lock on one server.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Server {
    pub lock: Option<LockHash>,
    /// The lock key when it is a string (then `lock` is `None`).
    pub plain: Option<PlainLock>,
    /// The fencing counter `:f` (its 60 s expiry outlives the model's horizon).
    pub fence: Option<u64>,
    /// The fair queue `:ql` and its expiry.
    pub queue: Vec<Waiter>,
    pub queue_expires: Time,
    /// Heartbeat keys `:hb:<waiter>` -> expiry.
    pub heartbeats: BTreeMap<Waiter, Time>,
    /// Managers waiting in exclusive mode (`:w`, a zset in arrival order) and its expiry.
    pub waiters: Vec<Client>,
    pub waiters_expires: Time,
    /// The takeover mark `:d` of the hold, if a probe saw its holder's manager missing.
    pub mark: Option<Mark>,
}

/// A takeover mark: when a probe first saw the holder's manager missing (server time), the
/// hold it judged (owner and token), and its expiry (the hold's, when it was set).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Mark {
    pub since: Time,
    pub owner: Client,
    pub token: u64,
    /// `None`: a key without an expiry.
    pub expires: Option<Time>,
}

impl Server {
    /// Drops every key whose expiry is not after `now` (Redis checks expiry on every access).
    pub fn expire(&mut self, now: Time) {
        if self
            .lock
            .as_ref()
            .is_some_and(|l| l.expires.is_some_and(|e| e <= now))
        {
            self.lock = None;
        }
        if self.plain.as_ref().is_some_and(|p| p.expires <= now) {
            self.plain = None;
        }
        if self.queue_expires <= now {
            self.queue.clear();
        }
        self.heartbeats.retain(|_, e| *e > now);
        if self.waiters_expires <= now {
            self.waiters.clear();
        }
        if self
            .mark
            .as_ref()
            .is_some_and(|m| m.expires.is_some_and(|e| e <= now))
        {
            self.mark = None;
        }
    }

    /// Whether a key of this server has no expiry.
    pub fn key_without_expiry(&self) -> bool {
        self.lock.as_ref().is_some_and(|l| l.expires.is_none())
            || self.mark.as_ref().is_some_and(|m| m.expires.is_none())
    }
}

/// A pub/sub message on a manager's inbox channel.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Msg {
    /// The lock may be free (exclusive mode).
    Free,
    /// The lock was granted to this wait under this token.
    Grant(Waiter, u64),
}

/// What a client's one request is doing.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Phase {
    Idle,
    /// Waiting in exclusive mode; `recorded`: an attempt recorded this manager as waiting.
    Exclusive {
        lease: Time,
        recorded: bool,
    },
    /// Waiting in the fair queue as `waiter`; `queued`: an attempt joined already.
    Fair {
        lease: Time,
        waiter: Waiter,
        queued: bool,
    },
}

/// One guard of a hold: the token it was acquired under and its lease.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Guard {
    pub token: u64,
    pub lease: Time,
    /// The fencing token of the request holding through this guard: the hold's own, or the
    /// next of its block after a hand-off in memory (`token` stays the server's).
    pub fence: u64,
}

/// A client process: its request, its guards (a re-entry adds one) and its inbox.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Proc {
    pub alive: bool,
    pub phase: Phase,
    pub guards: Vec<Guard>,
    /// When the hold's `lost()` fires, in the clients' time (`State::client_now`).
    pub deadline: Time,
    /// Releases sent by guards dropped after `lost()` fired, not yet run (they may land late):
    /// each hold's token, and whether it was a plain one (in fair mode or not).
    pub late_releases: Vec<(u64, Option<bool>)>,
    /// Messages published to this manager, not yet read; any one may be read next or dropped.
    pub inbox: Vec<Msg>,
    /// A release answered 'more': this manager owes a `grant_on` call.
    pub grant_on: bool,
    /// The next wait number of this owner.
    pub next_wait: u8,
    /// Acquisitions this process may still start (the bound on its requests).
    pub budget: u8,
    /// Ghost: a restart with loss took this hold from the server. Exclusion rests on the server
    /// keeping its writes; the watchdog's next renewal tells the holder (contract 6).
    pub forgotten: bool,
    /// A second request of this process waits for its hold, in memory (a cohort).
    pub cohort: bool,
    /// The hold (its token) the server answered a call with since the clock last advanced: the
    /// proof a hand-off in memory needs (its 10 ms window is far shorter than a tick or a
    /// restart). A proof is of one hold: a re-entry that found the lock gone and took it afresh
    /// proves the new hold, not the old one.
    pub proven: Option<u64>,
    /// The last answer said "try again at once" (the liveness check's clock does not advance,
    /// so this is the only retry that is not a wake-up).
    pub again: bool,
    /// The hold is a plain lock (its mode: fair or not), taken by `SET NX`.
    pub plain: Option<bool>,
    /// A grant's token the inbox handed to the waiting request (its ticket), not yet taken.
    pub grant: Option<u64>,
    /// When the request's last attempt found the lock busy, or its last heartbeat found it
    /// queued (clients' time): a grant's claim is counted from there (`take_grant`).
    pub since: Time,
    /// Attempts that found the lock busy since the request queued (`busy_attempts`).
    pub busy_attempts: u8,
    /// The inbox connection is subscribed (the server sees the manager listening).
    pub subscribed: bool,
    /// The hold's takeover base, `max(R, P)` (clients' time): `lost()` fires a grace less the
    /// drift allowance after it.
    pub heard: Time,
    /// The live inbox connection was subscribed before R: its PINGs prove the hold.
    pub proofs_count: bool,
    /// The live inbox connection was subscribed before `since` (a taken grant's R).
    pub since_subscribed: bool,
}

/// Ghost fields: what happened, for the properties.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Ghost {
    /// The highest token a fresh acquisition has been given.
    pub max_token: u64,
    /// A fresh acquisition got a token not above every earlier one.
    pub token_regressed: bool,
    /// A release or renewal changed a hold it did not make.
    pub touched_foreign: bool,
    /// The processes that have taken the lock (a bit each), for the liveness check.
    pub took: u8,
}

/// The whole model state.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct State {
    /// Server time.
    pub now: Time,
    /// How far the server's clock is ahead of the clients' (within the drift bound).
    pub skew: Time,
    pub server: Server,
    pub snapshot: Option<Server>,
    pub restarts: u8,
    pub procs: Vec<Proc>,
    pub ghost: Ghost,
}

impl State {
    /// The clients' clock: the server's, less the drift it gained.
    pub fn client_now(&self) -> Time {
        self.now - self.skew
    }
}
