//! The shared locks' model: its bounds, its initial state and the steps of the environment (the
//! clock, a snapshot, a restart with loss, a process dying, pub/sub dropping messages). The
//! steps of the client processes are in `shared_clients.rs`.

use crate::defects::Defects;
use crate::model::Loss;
use crate::shared_checks::shared_properties;
use crate::shared_scripts::{holds, SharedCtx};
use crate::shared_state::{
    Family, Kind, SharedGhost, SharedPhase, SharedProc, SharedServer, SharedState,
};
use crate::state::{Client, Time};
use stateright::{Model, Property};

/// The bounds of one check of a shared lock, and the defects it carries.
#[derive(Clone, Debug)]
pub struct SharedConfig {
    pub clients: u8,
    pub family: Family,
    /// The kinds of hold a request may ask for.
    pub kinds: Vec<Kind>,
    /// The lease of every hold, in ticks.
    pub lease: Time,
    /// The heartbeat deadline and claim lease, in ticks.
    pub eviction: Time,
    pub max_time: Time,
    pub restarts: u8,
    /// Acquisitions and read group joins each process may start.
    pub budget: u8,
    /// Reads that may join a read group after its leader (the bound of local hand-offs).
    pub joins: u8,
    pub deaths: bool,
    pub defects: Defects,
}

/// A step of the environment or of a client process.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum SharedAction {
    Tick,
    Snapshot,
    Restart(Loss),
    Die(Client),
    DropMsg(Client, usize),
    Acquire(Client, Kind),
    Retry(Client),
    ReadMsg(Client, usize),
    Abandon(Client),
    Heartbeat(Client),
    /// A request holding through the process's hold lets go (the last one releases the hold).
    Release(Client),
    LateRelease(Client),
    Renew(Client),
    Lost(Client),
    GrantOn(Client),
    /// A read joins its process's held read in memory (a read group).
    Join(Client),
    /// The read group asks the server whether it still holds the group's hold.
    Confirm(Client),
}

/// The protocol of one read/write lock or semaphore on one Redis server.
#[derive(Clone, Debug)]
pub struct SharedModel {
    pub cfg: SharedConfig,
}

pub(crate) fn shared_proc(alive: bool, budget: u8) -> SharedProc {
    SharedProc {
        alive,
        phase: SharedPhase::Idle,
        hold: None,
        deadline: 0,
        proven: false,
        late_releases: Vec::new(),
        inbox: Vec::new(),
        grant_on: false,
        next_wait: 0,
        budget,
    }
}

impl SharedModel {
    /// The context of a script call in `state`.
    pub fn ctx<'a>(&self, s: &SharedState, alive: &'a [bool]) -> SharedCtx<'a> {
        SharedCtx {
            now: s.now,
            defects: self.cfg.defects,
            family: self.cfg.family,
            alive,
            out: Vec::new(),
        }
    }

    fn environment(&self, s: &SharedState, actions: &mut Vec<SharedAction>) {
        if s.now < self.cfg.max_time {
            actions.push(SharedAction::Tick);
            if s.restarts < self.cfg.restarts {
                actions.push(SharedAction::Restart(Loss::Nothing));
                actions.push(SharedAction::Restart(Loss::Everything));
                if s.snapshot.is_some() {
                    actions.push(SharedAction::Restart(Loss::ToSnapshot));
                }
            }
        }
        if s.snapshot.is_none() && s.restarts < self.cfg.restarts {
            actions.push(SharedAction::Snapshot);
        }
        let all_alive = s.procs.iter().all(|p| p.alive);
        for (i, p) in s.procs.iter().enumerate() {
            let c = i as Client;
            if self.cfg.deaths && all_alive {
                actions.push(SharedAction::Die(c));
            }
            for m in 0..p.inbox.len() {
                actions.push(SharedAction::DropMsg(c, m));
            }
        }
    }

    pub(crate) fn step_environment(&self, s: &mut SharedState, action: &SharedAction) {
        match action {
            SharedAction::Tick => {
                s.now += 1;
                s.procs.iter_mut().for_each(|p| p.proven = false);
            }
            SharedAction::Snapshot => s.snapshot = Some(s.server.clone()),
            SharedAction::Restart(loss) => {
                s.restarts += 1;
                s.now += 1;
                s.server = match loss {
                    Loss::Nothing => s.server.clone(),
                    Loss::ToSnapshot => restored(s.snapshot.clone().unwrap_or_default()),
                    Loss::Everything => SharedServer::default(),
                };
                s.server.expire(s.now);
                forget_lost_holds(s);
            }
            SharedAction::Die(c) => s.procs[usize::from(*c)] = shared_proc(false, 0),
            SharedAction::DropMsg(c, m) => {
                s.procs[usize::from(*c)].inbox.remove(*m);
            }
            _ => unreachable!("a client step"),
        }
        s.server.expire(s.now);
    }
}

/// After a restart: the pub/sub connections dropped (messages and proofs go), and every member
/// of a hold the server no longer has is marked: exclusion rests on the server keeping its
/// writes, and the watchdog's next renewal tells the holder (contract 6).
fn forget_lost_holds(s: &mut SharedState) {
    for (i, p) in s.procs.iter_mut().enumerate() {
        p.inbox.clear();
        p.proven = false;
        let c = i as Client;
        let server = &s.server;
        if let Some(hold) = p.hold.as_mut() {
            let kept = holds(server, c, hold.token) && server.holders.contains_key(&c);
            if !kept {
                hold.members.iter_mut().for_each(|m| m.forgotten = true);
            }
        }
    }
}

fn restored(mut server: SharedServer) -> SharedServer {
    if let Some(h) = server.hash.as_mut() {
        h.restored = true;
    }
    server
}

impl Model for SharedModel {
    type State = SharedState;
    type Action = SharedAction;

    fn init_states(&self) -> Vec<SharedState> {
        let procs = (0..self.cfg.clients)
            .map(|_| shared_proc(true, self.cfg.budget))
            .collect();
        vec![SharedState {
            now: 0,
            server: SharedServer::default(),
            snapshot: None,
            restarts: 0,
            procs,
            ghost: SharedGhost::default(),
        }]
    }

    fn actions(&self, s: &SharedState, actions: &mut Vec<SharedAction>) {
        self.environment(s, actions);
        self.client_actions(s, actions);
    }

    fn next_state(&self, last: &SharedState, action: SharedAction) -> Option<SharedState> {
        let mut s = last.clone();
        match action {
            SharedAction::Tick
            | SharedAction::Snapshot
            | SharedAction::Restart(_)
            | SharedAction::Die(_)
            | SharedAction::DropMsg(..) => self.step_environment(&mut s, &action),
            _ => self.step_client(&mut s, &action),
        }
        Some(s)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        shared_properties()
    }
}
