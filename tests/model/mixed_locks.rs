//! A read/write lock beside an exclusive/fair one, both served by one manager per process: one
//! inbox carries the fair grants of one and the shared grants of the other, one watchdog batch
//! renews a hash hold and a shared hold, one heartbeats a fair wait and a shared wait, and a
//! restart, a pause or a death hits both. Each lock's steps are its own model's (`clients.rs`,
//! `shared_clients.rs`); what the manager shares is modelled here.
//!
//! Implementation notes:
//! - Each lock keeps its whole model state; the environment steps both in lockstep, so their
//!   clocks, restarts and snapshots agree. What a lock's scripts publish moves to the one inbox
//!   at once, tagged with its lock.
//! - The ghost `crossed` records that a message or an answer of one lock changed the other's
//!   state: the property "a message for one lock never acts on the other".

use crate::model::{Action, Config, LockModel, Loss};
use crate::shared_model::{SharedAction, SharedConfig, SharedModel};
use crate::shared_state::{SharedPhase, SharedState};
use crate::state::{Client, Msg, Phase, State, Waiter};
use stateright::{Model, Property};

/// A message on a manager's inbox channel, and the lock it is for.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Tagged {
    /// A wake-up or a fair grant of the exclusive/fair lock.
    Exclusive(Msg),
    /// A grant of the read/write lock: the wait and its token.
    Shared(Waiter, u64),
}

/// Both locks' states and each process's one inbox.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct MixedState {
    pub exclusive: State,
    pub shared: SharedState,
    pub inboxes: Vec<Vec<Tagged>>,
    /// A message or an answer of one lock changed the other's state.
    pub crossed: bool,
}

/// A step: the environment's, a batch of the watchdog, the inbox's, or one lock's step.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum MixedAction {
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
    Exclusive(Action),
    Shared(SharedAction),
}

/// An exclusive/fair lock and a read/write lock on one server, each process's manager serving
/// both.
#[derive(Clone, Debug)]
pub struct MixedModel {
    pub exclusive: LockModel,
    pub shared: SharedModel,
}

impl MixedModel {
    /// The bounds `cfg` of the exclusive/fair lock, and those of the read/write lock that
    /// match them (processes, clock, restarts, deaths, eviction, defects).
    pub fn new(cfg: Config, mut shared: SharedConfig) -> MixedModel {
        shared.clients = cfg.clients;
        (shared.max_time, shared.restarts) = (cfg.max_time, cfg.restarts);
        (shared.deaths, shared.eviction) = (cfg.deaths, cfg.eviction);
        shared.defects = cfg.defects;
        MixedModel {
            exclusive: LockModel { cfg },
            shared: SharedModel { cfg: shared },
        }
    }

    fn cfg(&self) -> &Config {
        &self.exclusive.cfg
    }

    fn exclusive_live(s: &MixedState, c: Client) -> bool {
        let p = &s.exclusive.procs[usize::from(c)];
        !p.guards.is_empty() && s.exclusive.now < p.deadline
    }

    fn shared_live(s: &MixedState, c: Client) -> bool {
        let p = &s.shared.procs[usize::from(c)];
        p.hold.is_some() && s.shared.now < p.deadline
    }

    fn environment(&self, s: &MixedState, actions: &mut Vec<MixedAction>) {
        let (now, restarts) = (s.exclusive.now, s.exclusive.restarts);
        if now < self.cfg().max_time {
            actions.push(MixedAction::Tick);
            if restarts < self.cfg().restarts {
                actions.push(MixedAction::Restart(Loss::Nothing));
                actions.push(MixedAction::Restart(Loss::Everything));
                if s.exclusive.snapshot.is_some() {
                    actions.push(MixedAction::Restart(Loss::ToSnapshot));
                }
            }
        }
        if s.exclusive.snapshot.is_none() && restarts < self.cfg().restarts {
            actions.push(MixedAction::Snapshot);
        }
        let procs = &s.exclusive.procs;
        let all_alive = procs.iter().all(|p| p.alive);
        for (i, p) in procs.iter().enumerate().filter(|(_, p)| p.alive) {
            let c = i as Client;
            if self.cfg().deaths && all_alive {
                actions.push(MixedAction::Die(c));
            }
            for m in 0..s.inboxes[i].len() {
                actions.push(MixedAction::DropMsg(c, m));
                actions.push(MixedAction::ReadMsg(c, m));
            }
            if Self::exclusive_live(s, c) || Self::shared_live(s, c) {
                actions.push(MixedAction::RenewBatch(c));
            }
            let fair = matches!(p.phase, Phase::Fair { queued: true, .. });
            let shared = &s.shared.procs[i].phase;
            let waits = matches!(shared, SharedPhase::Waiting { queued: true, .. });
            if fair || waits {
                actions.push(MixedAction::HeartbeatBatch(c));
            }
        }
    }

    /// Each lock's own steps, but for those the one manager makes for both: renewals,
    /// heartbeats and reading the inbox.
    fn lock_actions(&self, s: &MixedState, actions: &mut Vec<MixedAction>) {
        let mut own = Vec::new();
        self.exclusive.client_actions(&s.exclusive, &mut own);
        let shared = |a: &Action| {
            matches!(
                a,
                Action::Renew { .. } | Action::Heartbeat(_) | Action::ReadMsg(..)
            )
        };
        let own = own.into_iter().filter(|a| !shared(a));
        actions.extend(own.map(MixedAction::Exclusive));
        let mut own = Vec::new();
        self.shared.client_actions(&s.shared, &mut own);
        let shared = |a: &SharedAction| {
            matches!(
                a,
                SharedAction::Renew(_) | SharedAction::Heartbeat(_) | SharedAction::ReadMsg(..)
            )
        };
        let own = own.into_iter().filter(|a| !shared(a));
        actions.extend(own.map(MixedAction::Shared));
    }
}

impl MixedModel {
    /// Moves what each lock's scripts published to the one inbox of its manager, tagged.
    fn collect(s: &mut MixedState) {
        for (i, inbox) in s.inboxes.iter_mut().enumerate() {
            let exclusive = s.exclusive.procs[i].inbox.drain(..);
            inbox.extend(exclusive.map(Tagged::Exclusive));
            let shared = s.shared.procs[i].inbox.drain(..);
            inbox.extend(shared.map(|(w, token)| Tagged::Shared(w, token)));
        }
    }

    /// A step of the environment: both locks' keys live on the one server.
    fn step_environment(&self, s: &mut MixedState, action: &MixedAction) {
        let (one, shared) = match *action {
            MixedAction::Tick => (Action::Tick, SharedAction::Tick),
            MixedAction::Snapshot => (Action::Snapshot, SharedAction::Snapshot),
            MixedAction::Restart(loss) => (Action::Restart(loss), SharedAction::Restart(loss)),
            MixedAction::Die(c) => (Action::Die(c), SharedAction::Die(c)),
            MixedAction::DropMsg(c, m) => {
                s.inboxes[usize::from(c)].remove(m);
                return;
            }
            _ => unreachable!("a step of a process"),
        };
        self.exclusive.step_environment(&mut s.exclusive, &one);
        self.shared.step_environment(&mut s.shared, &shared);
        match *action {
            // the one pub/sub connection dropped: every message of both locks goes
            MixedAction::Restart(_) => s.inboxes.iter_mut().for_each(Vec::clear),
            MixedAction::Die(c) => s.inboxes[usize::from(c)].clear(),
            _ => {}
        }
    }

    /// The manager of `c` reads message `m` and routes it to the lock it is for.
    fn read_msg(&self, s: &mut MixedState, c: Client, m: usize) {
        let tagged = s.inboxes[usize::from(c)].remove(m);
        let routed = if self.cfg().defects.route_by_waiter {
            route_by_waiter(s, c, tagged.clone())
        } else {
            tagged.clone()
        };
        let crossed = std::mem::discriminant(&routed) != std::mem::discriminant(&tagged);
        let i = usize::from(c);
        match routed {
            Tagged::Exclusive(msg) => {
                let before = s.exclusive.clone();
                s.exclusive.procs[i].inbox.push(msg);
                let last = s.exclusive.procs[i].inbox.len() - 1;
                let read = Action::ReadMsg(c, last);
                self.exclusive.step_client(&mut s.exclusive, &read);
                s.crossed |= crossed && s.exclusive != before;
            }
            Tagged::Shared(w, token) => {
                let before = s.shared.clone();
                s.shared.procs[i].inbox.push((w, token));
                let last = s.shared.procs[i].inbox.len() - 1;
                let read = SharedAction::ReadMsg(c, last);
                self.shared.step_client(&mut s.shared, &read);
                s.crossed |= crossed && s.shared != before;
            }
        }
        Self::collect(s);
    }

    /// One watchdog call renews every live hold of `c`; each answer is applied to its lock.
    fn renew_batch(&self, s: &mut MixedState, c: Client) {
        let alive: Vec<bool> = s.exclusive.procs.iter().map(|p| p.alive).collect();
        let i = usize::from(c);
        let mut answers = Vec::new();
        if Self::exclusive_live(s, c) {
            let lease = s.exclusive.procs[i].guards[0].lease;
            let ctx = self.exclusive.ctx(&s.exclusive, &alive);
            let renewed = self
                .exclusive
                .renew_script(&mut s.exclusive, &ctx, c, lease);
            answers.push((true, renewed));
        }
        if Self::shared_live(s, c) {
            let token = s.shared.procs[i].hold.as_ref().expect("held").token;
            let ctx = self.shared.ctx(&s.shared, &alive);
            let lease = self.shared.cfg.lease;
            let server = &mut s.shared.server;
            let renewed = crate::shared_scripts::shared_renew(server, &ctx, c, token, lease);
            answers.push((false, renewed));
        }
        let truth: Vec<bool> = answers.iter().map(|a| a.1).collect();
        if self.cfg().defects.batch_swapped {
            let (locks, mut renewed): (Vec<bool>, Vec<bool>) = answers.into_iter().unzip();
            renewed.reverse();
            answers = locks.into_iter().zip(renewed).collect();
        }
        for ((exclusive, renewed), own) in answers.into_iter().zip(truth) {
            s.crossed |= renewed != own;
            if exclusive {
                self.apply_exclusive_renewal(s, c, renewed);
            } else {
                self.apply_shared_renewal(s, c, renewed);
            }
        }
    }

    fn apply_exclusive_renewal(&self, s: &mut MixedState, c: Client, renewed: bool) {
        let now = s.exclusive.now;
        let p = &mut s.exclusive.procs[usize::from(c)];
        if renewed {
            let lease = p.guards[0].lease;
            p.deadline = p.deadline.max(now + lease);
        } else {
            crate::clients::lose(&mut s.exclusive, c);
        }
    }

    fn apply_shared_renewal(&self, s: &mut MixedState, c: Client, renewed: bool) {
        let (now, lease) = (s.shared.now, self.shared.cfg.lease);
        let p = &mut s.shared.procs[usize::from(c)];
        if renewed {
            p.deadline = p.deadline.max(now + lease);
            p.proven = true;
        } else {
            crate::shared_clients::lose(p);
        }
    }

    /// One watchdog call pushes back the heartbeat of every queued wait of `c`.
    fn heartbeat_batch(&self, s: &mut MixedState, c: Client) {
        let i = usize::from(c);
        if let Phase::Fair {
            waiter,
            queued: true,
            ..
        } = s.exclusive.procs[i].phase
        {
            let ctx = self.exclusive.ctx(&s.exclusive, &[]);
            let eviction = self.exclusive.server_eviction();
            crate::fair::heartbeat(&mut s.exclusive.server, &ctx, waiter, eviction);
        }
        if let SharedPhase::Waiting {
            waiter,
            queued: true,
            ..
        } = s.shared.procs[i].phase
        {
            let ctx = self.shared.ctx(&s.shared, &[]);
            let eviction = self.shared.cfg.eviction;
            crate::shared_scripts::shared_heartbeat(&mut s.shared.server, &ctx, waiter, eviction);
        }
    }
}

/// The seeded defect's routing: a grant goes to the lock whose request waits under the
/// grant's waiter id, the other lock's first (wait numbers are per lock).
fn route_by_waiter(s: &MixedState, c: Client, tagged: Tagged) -> Tagged {
    let i = usize::from(c);
    match tagged {
        Tagged::Exclusive(Msg::Grant(w, token)) => {
            let shared = &s.shared.procs[i].phase;
            let waits = matches!(shared, SharedPhase::Waiting { waiter, .. } if *waiter == w);
            if waits {
                Tagged::Shared(w, token)
            } else {
                tagged
            }
        }
        Tagged::Shared(w, token) => {
            let phase = &s.exclusive.procs[i].phase;
            let waits = matches!(phase, Phase::Fair { waiter, .. } if *waiter == w);
            if waits {
                Tagged::Exclusive(Msg::Grant(w, token))
            } else {
                tagged
            }
        }
        other => other,
    }
}

impl Model for MixedModel {
    type State = MixedState;
    type Action = MixedAction;

    fn init_states(&self) -> Vec<MixedState> {
        let clients = usize::from(self.cfg().clients);
        vec![MixedState {
            exclusive: self.exclusive.init_states().swap_remove(0),
            shared: self.shared.init_states().swap_remove(0),
            inboxes: vec![Vec::new(); clients],
            crossed: false,
        }]
    }

    fn actions(&self, s: &MixedState, actions: &mut Vec<MixedAction>) {
        self.environment(s, actions);
        self.lock_actions(s, actions);
    }

    fn next_state(&self, last: &MixedState, action: MixedAction) -> Option<MixedState> {
        let mut s = last.clone();
        match action {
            MixedAction::ReadMsg(c, m) => self.read_msg(&mut s, c, m),
            MixedAction::RenewBatch(c) => self.renew_batch(&mut s, c),
            MixedAction::HeartbeatBatch(c) => self.heartbeat_batch(&mut s, c),
            MixedAction::Exclusive(ref a) => {
                self.exclusive.step_client(&mut s.exclusive, a);
                Self::collect(&mut s);
            }
            MixedAction::Shared(ref a) => {
                self.shared.step_client(&mut s.shared, a);
                Self::collect(&mut s);
            }
            _ => self.step_environment(&mut s, &action),
        }
        Some(s)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        crate::mixed_checks::mixed_properties()
    }
}
