//! Two locks served by one manager per process: one inbox carries the messages of both, one
//! watchdog renews both holds and heartbeats both waits in one batch, and a restart, a pause or
//! a death hits both. Each lock's steps are the one-lock model's (`clients.rs`), run on a view
//! of that lock; what is shared is modelled here. The second lock may also be taken on the
//! plain path (`SET NX`), so one batch renews a plain hold and a hash hold.
//!
//! Implementation notes:
//! - A batch is one atomic step: renew.lua and heartbeat.lua take many keys in one call, and a
//!   standalone server runs both locks' keys.
//! - The ghost `crossed` records that a message or an answer of one lock changed the state of
//!   the other: the property "a message for one lock never acts on the other".

use crate::model::{proc, Action, Config, LockModel, Loss};
use crate::state::{Client, Ghost, Msg, Phase, Proc, Server, State, Time};
use stateright::{Model, Property};

/// The locks, by index.
pub type LockIx = u8;

/// The lock that may be taken on the plain path (`SET NX`) as well as by the scripts.
pub const PLAIN_LOCK: LockIx = 1;

/// A process: its part in each lock, and its one inbox (each message tagged with its lock).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TwoProc {
    pub locks: [Proc; 2],
    pub inbox: Vec<(LockIx, Msg)>,
}

/// The state: one server with both locks' keys, and the processes.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TwoState {
    pub now: Time,
    pub servers: [Server; 2],
    pub snapshot: Option<[Server; 2]>,
    pub restarts: u8,
    pub procs: Vec<TwoProc>,
    pub ghosts: [Ghost; 2],
    /// A message or an answer of one lock changed the other's state.
    pub crossed: bool,
}

/// A step: the environment's, a batch of the watchdog, the inbox's, or one lock's step.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum TwoAction {
    Tick,
    Snapshot,
    Restart(Loss),
    Die(Client),
    DropMsg(Client, usize),
    ReadMsg(Client, usize),
    /// The watchdog renews every live hold of the process in one call.
    RenewBatch(Client),
    /// The watchdog pushes back every queued wait's heartbeat in one call.
    HeartbeatBatch(Client),
    /// A step of a request on one lock.
    On(LockIx, Action),
}

/// Two locks on one server, the processes' managers serving both.
#[derive(Clone, Debug)]
pub struct TwoLockModel {
    pub cfg: Config,
}

impl TwoLockModel {
    /// The one-lock model each lock's steps run in.
    pub fn one(&self) -> LockModel {
        LockModel {
            cfg: self.cfg.clone(),
        }
    }

    /// The one-lock model lock `l`'s own steps run in: only [`PLAIN_LOCK`] may be taken on
    /// the plain path (when `cfg.plain`), so that a plain hold and a hash hold meet in one
    /// manager's inbox and watchdog batch.
    pub fn lock_model(&self, l: LockIx) -> LockModel {
        let mut cfg = self.cfg.clone();
        cfg.plain &= l == PLAIN_LOCK;
        LockModel { cfg }
    }

    fn live(&self, s: &TwoState, c: Client, l: LockIx) -> bool {
        let p = &s.procs[usize::from(c)].locks[usize::from(l)];
        !p.guards.is_empty() && s.now < p.deadline
    }
}

/// Lock `l` as the one-lock model sees it.
pub fn view(s: &TwoState, l: LockIx) -> State {
    let l = usize::from(l);
    State {
        now: s.now,
        skew: 0,
        server: s.servers[l].clone(),
        snapshot: s.snapshot.as_ref().map(|both| both[l].clone()),
        restarts: s.restarts,
        procs: s.procs.iter().map(|p| p.locks[l].clone()).collect(),
        ghost: s.ghosts[l].clone(),
    }
}

/// Writes lock `l`'s view back; what its scripts published goes to the one inbox, tagged.
fn write_back(s: &mut TwoState, l: LockIx, mut v: State) {
    let i = usize::from(l);
    for (p, mut vp) in s.procs.iter_mut().zip(v.procs.drain(..)) {
        p.inbox.extend(vp.inbox.drain(..).map(|m| (l, m)));
        p.locks[i] = vp;
    }
    s.servers[i] = v.server;
    if let (Some(both), Some(one)) = (s.snapshot.as_mut(), v.snapshot) {
        both[i] = one;
    }
    s.ghosts[i] = v.ghost;
    s.now = v.now;
    s.restarts = v.restarts;
}

impl TwoLockModel {
    fn environment(&self, s: &TwoState, actions: &mut Vec<TwoAction>) {
        if s.now < self.cfg.max_time {
            actions.push(TwoAction::Tick);
            if s.restarts < self.cfg.restarts {
                actions.push(TwoAction::Restart(Loss::Nothing));
                actions.push(TwoAction::Restart(Loss::Everything));
                if s.snapshot.is_some() {
                    actions.push(TwoAction::Restart(Loss::ToSnapshot));
                }
            }
        }
        if s.snapshot.is_none() && s.restarts < self.cfg.restarts {
            actions.push(TwoAction::Snapshot);
        }
        let all_alive = s.procs.iter().all(|p| p.locks[0].alive);
        for (i, p) in s.procs.iter().enumerate() {
            let c = i as Client;
            if !p.locks[0].alive {
                continue;
            }
            if self.cfg.deaths && all_alive {
                actions.push(TwoAction::Die(c));
            }
            for m in 0..p.inbox.len() {
                actions.push(TwoAction::DropMsg(c, m));
                actions.push(TwoAction::ReadMsg(c, m));
            }
            if (0..2).any(|l| self.live(s, c, l)) {
                actions.push(TwoAction::RenewBatch(c));
            }
            let queued = |l: &Proc| matches!(l.phase, Phase::Fair { queued: true, .. });
            if p.locks.iter().any(queued) {
                actions.push(TwoAction::HeartbeatBatch(c));
            }
        }
    }

    /// Each lock's own steps, but for those the one manager makes for both: renewals,
    /// heartbeats and reading the inbox.
    fn lock_actions(&self, s: &TwoState, actions: &mut Vec<TwoAction>) {
        for l in 0..2 {
            let mut own = Vec::new();
            self.lock_model(l).client_actions(&view(s, l), &mut own);
            let shared = |a: &Action| {
                matches!(
                    a,
                    Action::Renew { .. } | Action::Heartbeat(_) | Action::ReadMsg(..)
                )
            };
            actions.extend(
                own.into_iter()
                    .filter(|a| !shared(a))
                    .map(|a| TwoAction::On(l, a)),
            );
        }
    }

    /// A step of the environment: both locks' keys live on the one server.
    fn step_environment(&self, s: &mut TwoState, action: &TwoAction) {
        let one_action = match *action {
            TwoAction::Tick => Action::Tick,
            TwoAction::Snapshot => Action::Snapshot,
            TwoAction::Restart(loss) => Action::Restart(loss),
            TwoAction::Die(c) => {
                let p = &mut s.procs[usize::from(c)];
                p.locks = [proc(false, 0), proc(false, 0)];
                p.inbox.clear();
                return;
            }
            TwoAction::DropMsg(c, m) => {
                s.procs[usize::from(c)].inbox.remove(m);
                return;
            }
            _ => unreachable!("a step of a process"),
        };
        if one_action == Action::Snapshot {
            s.snapshot = Some(s.servers.clone());
            return;
        }
        let before = (s.now, s.restarts);
        for l in 0..2 {
            (s.now, s.restarts) = before;
            let mut v = view(s, l);
            self.one().step_environment(&mut v, &one_action);
            write_back(s, l, v);
        }
        if matches!(action, TwoAction::Restart(_)) {
            // the one pub/sub connection dropped: every message of both locks goes
            s.procs.iter_mut().for_each(|p| p.inbox.clear());
        }
    }

    /// The manager of `c` reads message `m` and routes it to the lock it is for.
    fn read_msg(&self, s: &mut TwoState, c: Client, m: usize) {
        let (tagged, msg) = s.procs[usize::from(c)].inbox.remove(m);
        let l = if self.cfg.defects.route_by_waiter {
            route_by_waiter(s, c, tagged, &msg)
        } else {
            tagged
        };
        let mut v = view(s, l);
        let before = v.clone();
        v.procs[usize::from(c)].inbox.push(msg);
        self.lock_model(l)
            .step_client(&mut v, &Action::ReadMsg(c, 0));
        s.crossed |= l != tagged && v != before;
        write_back(s, l, v);
    }

    /// One watchdog call renews every live hold of `c`; each answer is applied to its lock.
    fn renew_batch(&self, s: &mut TwoState, c: Client) {
        let held: Vec<LockIx> = (0..2).filter(|&l| self.live(s, c, l)).collect();
        let mut answers = Vec::new();
        for &l in &held {
            let mut v = view(s, l);
            let lease = v.procs[usize::from(c)].guards[0].lease;
            let ctx = self.one().ctx(&v, &[]);
            answers.push((self.one().renew_script(&mut v, &ctx, c, lease), lease));
            write_back(s, l, v);
        }
        let truth: Vec<bool> = answers.iter().map(|a| a.0).collect();
        if self.cfg.defects.batch_swapped {
            answers.reverse();
        }
        for (i, (&l, &(renewed, lease))) in held.iter().zip(&answers).enumerate() {
            let own = truth[i];
            let p = &mut s.procs[usize::from(c)].locks[usize::from(l)];
            s.crossed |= renewed != own;
            if renewed {
                p.deadline = p.deadline.max(s.now + lease);
            } else {
                let mut v = view(s, l);
                crate::clients::lose(&mut v, c);
                write_back(s, l, v);
            }
        }
    }

    /// One watchdog call pushes back the heartbeat of every queued wait of `c`.
    fn heartbeat_batch(&self, s: &mut TwoState, c: Client) {
        for l in 0..2 {
            let p = &s.procs[usize::from(c)].locks[usize::from(l)];
            if let Phase::Fair {
                waiter,
                queued: true,
                ..
            } = p.phase
            {
                let v = view(s, l);
                let ctx = self.one().ctx(&v, &[]);
                let server = &mut s.servers[usize::from(l)];
                crate::fair::heartbeat(server, &ctx, waiter, self.cfg.eviction);
            }
        }
    }
}

/// The seeded defect's routing: a grant goes to the first lock whose request waits under the
/// grant's waiter id (wait numbers are per lock, so both locks may have the same).
fn route_by_waiter(s: &TwoState, c: Client, tagged: LockIx, msg: &Msg) -> LockIx {
    let Msg::Grant(w, _) = msg else {
        return tagged;
    };
    let p = &s.procs[usize::from(c)];
    let waits = |l: &Proc| matches!(l.phase, Phase::Fair { waiter, .. } if waiter == *w);
    (0..2)
        .find(|&l| waits(&p.locks[usize::from(l)]))
        .unwrap_or(tagged)
}

impl Model for TwoLockModel {
    type State = TwoState;
    type Action = TwoAction;

    fn init_states(&self) -> Vec<TwoState> {
        let procs = (0..self.cfg.clients).map(|_| TwoProc {
            locks: [proc(true, self.cfg.budget), proc(true, self.cfg.budget)],
            inbox: Vec::new(),
        });
        vec![TwoState {
            now: 0,
            servers: Default::default(),
            snapshot: None,
            restarts: 0,
            procs: procs.collect(),
            ghosts: Default::default(),
            crossed: false,
        }]
    }

    fn actions(&self, s: &TwoState, actions: &mut Vec<TwoAction>) {
        self.environment(s, actions);
        self.lock_actions(s, actions);
    }

    fn next_state(&self, last: &TwoState, action: TwoAction) -> Option<TwoState> {
        let mut s = last.clone();
        match action {
            TwoAction::ReadMsg(c, m) => self.read_msg(&mut s, c, m),
            TwoAction::RenewBatch(c) => self.renew_batch(&mut s, c),
            TwoAction::HeartbeatBatch(c) => self.heartbeat_batch(&mut s, c),
            TwoAction::On(l, ref a) => {
                let mut v = view(&s, l);
                self.lock_model(l).step_client(&mut v, a);
                write_back(&mut s, l, v);
            }
            _ => self.step_environment(&mut s, &action),
        }
        Some(s)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        crate::two_lock_checks::two_lock_properties()
    }
}
