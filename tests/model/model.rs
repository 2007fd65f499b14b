//! The model: its bounds, its initial states, and the steps of the environment (the clock, a
//! snapshot, a restart with loss, a process dying, pub/sub dropping or reordering messages).
//! The steps of the client processes are in `clients.rs`.

use crate::defects::Defects;
use crate::properties::properties;
use crate::scripts::Ctx;
use crate::state::{Client, Ghost, Msg, Phase, PlainLock, Proc, Server, State, Time};
use stateright::{Model, Property};

/// The bounds of one check, and the defects it carries.
#[derive(Clone, Debug)]
pub struct Config {
    /// Client processes (each one owner).
    pub clients: u8,
    /// The leases a request may ask for, in ticks.
    pub leases: Vec<Time>,
    /// The fair eviction: heartbeat deadline and claim lease, in ticks.
    pub eviction: Time,
    /// The clock does not advance past this.
    pub max_time: Time,
    /// Server restarts allowed.
    pub restarts: u8,
    /// Acquisitions (fresh or re-entries) each process may start.
    pub budget: u8,
    /// Whether one initial state has a dead process's two waits at the head of the queue.
    pub dead_queue: bool,
    /// Whether a process may die.
    pub deaths: bool,
    /// Whether a second request of a holding process may wait for its hold in memory (cohorts).
    pub cohorts: bool,
    /// The liveness check's bounds: the clock stands still and nothing fails, so that only a
    /// wake-up (or an answer "try again at once") moves a waiter on (see `liveness.rs`).
    pub liveness: bool,
    /// Whether a request may take a free lock on the plain path (`SET NX`, plain_release.lua).
    pub plain: bool,
    /// The drift bound, in ticks: how far the server's clock may gain on the clients' over any
    /// stretch, and the allowance each lease is asked of the server with (0: one clock).
    pub drift: Time,
    /// Whether a watchdog's renewal may go unanswered (it reached the server or not).
    pub unanswered: bool,
    /// Whether a fair waiter takes a grant from its message, without asking the server, while
    /// its claim may not have run out (`take_grant` in src/manager/acquire.rs); else it always
    /// confirms a grant by a call.
    pub take_grants: bool,
    /// The takeover grace of every process's holds, in ticks (`None`: takeover is off): a
    /// waiter may probe the holder, the environment may cut a live process's inbox, and the
    /// process resubscribes and PINGs (`takeover.rs`).
    pub takeover: Option<Time>,
    pub defects: Defects,
}

/// How much a restart loses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Loss {
    /// Nothing (persistence kept every write); the pub/sub connections drop.
    Nothing,
    /// Back to the last snapshot (an RDB, or an AOF cut before its last writes).
    ToSnapshot,
    /// Everything (no persistence).
    Everything,
}

/// A step of the environment or of a client process.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    Tick,
    /// The server's clock gains a tick on the clients'.
    Drift,
    Snapshot,
    Restart(Loss),
    Die(Client),
    DropMsg(Client, usize),
    Acquire {
        c: Client,
        lease: Time,
        fair: bool,
    },
    Retry(Client),
    ReadMsg(Client, usize),
    Abandon(Client),
    Heartbeat(Client),
    Release(Client),
    LateRelease(Client),
    Renew {
        c: Client,
        lease: Time,
    },
    Lost(Client),
    GrantOn(Client),
    CohortWait(Client),
    Confirm(Client),
    HandOff(Client),
    PlainAcquire {
        c: Client,
        lease: Time,
        fair: bool,
    },
    /// The acquire loop's turn with a grant in its ticket: drop it if stale, else take it.
    TakeGrant(Client),
    /// A renewal whose answer never comes; `reached`: the server ran it.
    RenewUnanswered {
        c: Client,
        lease: Time,
        reached: bool,
    },
    /// The server closes the inbox connection of a live process (`CLIENT KILL`).
    Cut(Client),
    /// The process's inbox subscribes again (a reconnection).
    Subscribe(Client),
    /// The process's inbox answers a PING: a proof that it is subscribed.
    Ping(Client),
    /// A waiting process runs takeover.lua on the lock.
    Probe(Client),
}

/// The lock protocol of one lock on one Redis server.
#[derive(Clone, Debug)]
pub struct LockModel {
    pub cfg: Config,
}

pub(crate) fn proc(alive: bool, budget: u8) -> Proc {
    Proc {
        alive,
        phase: Phase::Idle,
        guards: Vec::new(),
        deadline: 0,
        late_releases: Vec::new(),
        inbox: Vec::new(),
        grant_on: false,
        next_wait: 0,
        budget,
        forgotten: false,
        cohort: false,
        proven: None,
        again: false,
        plain: None,
        grant: None,
        since: 0,
        busy_attempts: 0,
        subscribed: alive,
        heard: 0,
        proofs_count: alive,
        since_subscribed: alive,
    }
}

impl LockModel {
    /// The lease the server is asked to keep for a lease of `lease` the client counts: the
    /// drift allowance more.
    pub fn server_lease(&self, lease: Time) -> Time {
        let allowance = if self.cfg.defects.no_drift_allowance {
            0
        } else {
            self.cfg.drift
        };
        lease + allowance
    }

    /// The heartbeat deadline and claim lease the server is asked to keep: the drift allowance
    /// more than the clients count (`server_ms` of the eviction, as the backend sends it).
    pub fn server_eviction(&self) -> Time {
        self.server_lease(self.cfg.eviction)
    }

    /// The context of a script call in `state`.
    pub fn ctx<'a>(&self, state: &State, alive: &'a [bool]) -> Ctx<'a> {
        Ctx {
            now: state.now,
            defects: self.cfg.defects,
            alive,
            out: Vec::new(),
        }
    }

    fn environment(&self, s: &State, actions: &mut Vec<Action>) {
        if s.skew < self.cfg.drift && s.now < self.cfg.max_time {
            actions.push(Action::Drift);
        }
        if s.now < self.cfg.max_time {
            actions.push(Action::Tick);
            if s.restarts < self.cfg.restarts {
                actions.push(Action::Restart(Loss::Nothing));
                actions.push(Action::Restart(Loss::Everything));
                if s.snapshot.is_some() {
                    actions.push(Action::Restart(Loss::ToSnapshot));
                }
            }
        }
        if s.snapshot.is_none() && s.restarts < self.cfg.restarts {
            actions.push(Action::Snapshot);
        }
        let all_alive = s
            .procs
            .iter()
            .take(usize::from(self.cfg.clients))
            .all(|p| p.alive);
        for (i, p) in s
            .procs
            .iter()
            .enumerate()
            .take(usize::from(self.cfg.clients))
        {
            let c = i as Client;
            if self.cfg.deaths && all_alive {
                actions.push(Action::Die(c));
            }
            if self.cfg.takeover.is_some() && p.alive && p.subscribed {
                actions.push(Action::Cut(c));
            }
            if !self.cfg.liveness {
                for m in 0..p.inbox.len() {
                    actions.push(Action::DropMsg(c, m));
                }
            }
        }
    }

    pub(crate) fn step_environment(&self, s: &mut State, action: &Action) {
        match action {
            Action::Tick | Action::Drift => {
                s.now += 1;
                s.skew += Time::from(*action == Action::Drift);
                // a proof is good for 10 ms: far less than a tick
                s.procs.iter_mut().for_each(|p| p.proven = None);
            }
            Action::Snapshot => s.snapshot = Some(s.server.clone()),
            Action::Restart(loss) => {
                s.restarts += 1;
                s.now += 1;
                let before = s.server.clone();
                s.server = match loss {
                    Loss::Nothing => s.server.clone(),
                    Loss::ToSnapshot => restored(s.snapshot.clone().unwrap_or_default()),
                    Loss::Everything => Server::default(),
                };
                s.server.expire(s.now);
                forget_lost_holds(s, &before);
                if self.cfg.takeover.is_some() {
                    // the run id changed: no mark counts; every inbox connection dropped
                    s.server.mark = None;
                    s.procs.iter_mut().for_each(crate::takeover::cut);
                }
            }
            Action::Die(c) => {
                let budget = 0;
                s.procs[usize::from(*c)] = proc(false, budget);
            }
            Action::DropMsg(c, m) => {
                s.procs[usize::from(*c)].inbox.remove(*m);
            }
            Action::Cut(c) => crate::takeover::cut(&mut s.procs[usize::from(*c)]),
            _ => unreachable!("a client step"),
        }
        s.server.expire(s.now);
    }

    /// Delivers what a script published to the managers it reached.
    pub fn deliver(s: &mut State, out: Vec<(Client, Msg)>) {
        for (c, msg) in out {
            s.procs[usize::from(c)].inbox.push(msg);
        }
    }
}

/// After a restart: the pub/sub connections dropped (messages and proofs go), and each process
/// whose hold the server lost, wholly or in part (a re-entry, or a lease extension a renewal or
/// re-entry made since the snapshot), is marked: exclusion rests on the server keeping its
/// writes, and the watchdog's next renewal tells the holder (contract 6).
fn forget_lost_holds(s: &mut State, before: &Server) {
    let lock = s.server.lock.as_ref();
    let plain = s.server.plain.as_ref();
    for (i, p) in s.procs.iter_mut().enumerate() {
        p.inbox.clear();
        p.proven = None;
        let c = i as Client;
        let Some(g) = p.guards.first() else {
            continue;
        };
        let plain_kept = p.plain.is_some_and(|fair| {
            let same = |l: &PlainLock| (l.owner, l.fair, l.hold) == (c, fair, g.token);
            let was = before.plain.as_ref().filter(|l| same(l)).map(|l| l.expires);
            plain.is_some_and(|l| same(l) && was.is_none_or(|e| l.expires >= e))
        });
        let hash_kept = lock.is_some_and(|l| {
            let count = l.holds.get(&c).copied().unwrap_or(0);
            let was = before.lock.as_ref().filter(|b| b.token == l.token);
            let lease_kept = was.is_none_or(|b| l.expires >= b.expires);
            l.token == Some(g.token) && usize::from(count) >= p.guards.len() && lease_kept
        });
        p.forgotten |= !(plain_kept || hash_kept);
    }
}

fn restored(mut server: Server) -> Server {
    if let Some(l) = server.lock.as_mut() {
        l.restored = true;
    }
    if let Some(p) = server.plain.as_mut() {
        p.restored = true;
    }
    server
}

impl Model for LockModel {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        let procs: Vec<Proc> = (0..self.cfg.clients)
            .map(|_| proc(true, self.cfg.budget))
            .collect();
        let clean = State {
            now: 0,
            skew: 0,
            server: Server::default(),
            snapshot: None,
            restarts: 0,
            procs,
            ghost: Ghost::default(),
        };
        let mut states = vec![clean.clone()];
        if self.cfg.dead_queue {
            // a killed process (the last index) left two waits queued, their heartbeats alive
            let dead = self.cfg.clients;
            let mut s = clean;
            s.procs.push(proc(false, 0));
            s.server.queue = vec![(dead, 0), (dead, 1)];
            s.server.queue_expires = self.cfg.eviction;
            s.server.heartbeats = [
                ((dead, 0), self.cfg.eviction),
                ((dead, 1), self.cfg.eviction),
            ]
            .into();
            states.push(s);
        }
        states
    }

    fn actions(&self, s: &State, actions: &mut Vec<Action>) {
        self.environment(s, actions);
        self.client_actions(s, actions);
    }

    fn next_state(&self, last: &State, action: Action) -> Option<State> {
        let mut s = last.clone();
        match action {
            Action::Tick
            | Action::Drift
            | Action::Snapshot
            | Action::Restart(_)
            | Action::Die(_)
            | Action::DropMsg(..)
            | Action::Cut(_) => self.step_environment(&mut s, &action),
            _ => self.step_client(&mut s, &action),
        }
        Some(s)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        properties(&self.cfg)
    }
}
