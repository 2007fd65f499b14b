//! One sequence of a shared lock: draw a step, run it on both sides, compare the answers, the
//! messages and the states, and keep each client's hold and waits as the answers say.

use super::super::ops::{Rng, Tokens};
use super::super::outcome::{Answer, Outcome};
use super::super::real::Real;
use super::super::run::compare;
use super::super::tally::Tally;
use super::super::tokens::TokenPairs;
use super::model_side::SharedModelSide;
use super::ops::{answer_message, draw, SharedOp, SharedParty};
use super::real_side;
use super::view::SharedView;
use crate::defects::Defects;
use crate::shared_state::Family;
use crate::state::Time;

/// Model processes per sequence.
pub const CLIENTS: u8 = 3;

/// Fresh tokens per tick before the clock must advance (see `../run.rs`).
const FRESH_PER_TICK: usize = 12;

/// Both sides of one shared lock's sequence, and what the generator knows of its clients.
pub struct SharedRun<'a> {
    real: &'a mut Real,
    pub model: SharedModelSide,
    parties: Vec<SharedParty>,
    tokens: TokenPairs,
    fresh_in_tick: usize,
    log: Vec<String>,
}

impl<'a> SharedRun<'a> {
    /// A clean start on both sides for a `family` lock, with this eviction (ticks).
    pub fn new(real: &'a mut Real, family: Family, eviction: Time) -> SharedRun<'a> {
        real.reset(CLIENTS);
        let alive = SharedParty {
            alive: true,
            ..SharedParty::default()
        };
        SharedRun {
            real,
            model: SharedModelSide::new(CLIENTS, family, eviction),
            parties: vec![alive; usize::from(CLIENTS)],
            tokens: TokenPairs::default(),
            fresh_in_tick: 0,
            log: vec![format!("{family:?}, eviction {eviction} tick(s)")],
        }
    }

    /// The next step the generator draws (a tick when this tick has its fill of tokens). A step
    /// that answers its client's first message reads it from the inbox.
    pub fn draw(&mut self, rng: &mut Rng) -> SharedOp {
        if self.fresh_in_tick >= FRESH_PER_TICK {
            return SharedOp::Tick;
        }
        let snapshot = self.model.snapshot.is_some();
        let op = draw(rng, &self.parties, self.model.family, snapshot);
        if let Some(c) = op.client() {
            let p = &mut self.parties[usize::from(c)];
            if p.inbox
                .first()
                .is_some_and(|m| answer_message(c, p, m) == op)
            {
                p.inbox.remove(0);
            }
        }
        op
    }

    /// Runs `op` on both sides and compares them; on a disagreement, the steps so far and why.
    pub fn step(&mut self, op: &SharedOp, tally: &mut Tally) -> Result<(), String> {
        if matches!(op, SharedOp::Tick | SharedOp::Restart(_)) {
            self.fresh_in_tick = 0;
        }
        let (family, eviction) = (self.model.family, self.model.eviction);
        let expected = self.model.step(op);
        let got = real_side::step(self.real, op, family, eviction, self.model.now);
        self.log.push(format!("{op:?} -> {expected:?}"));
        let fresh = compare(&expected, &got, &mut self.tokens)
            .and_then(|fresh| {
                let now_ms = self.real.now_ms();
                let real = SharedView::of_real(self.real.state(), now_ms);
                let (m, now) = (&self.model, self.model.now);
                let model = SharedView::of_model(&m.server, m.family, now, &m.names);
                SharedView::compare(&model, real, &mut self.tokens)?;
                Ok(fresh)
            })
            .map_err(|why| {
                let steps = self.log.join("\n  ");
                format!("{why}\nreal answer: {got:?}\nsteps:\n  {steps}")
            })?;
        self.fresh_in_tick += fresh;
        tally.count_named(op.name(), &expected);
        follow(&mut self.parties, op, &expected, &got);
        if matches!(op, SharedOp::Restart(_)) {
            self.parties.iter_mut().for_each(|p| p.inbox.clear());
        }
        for (c, message) in &expected.messages {
            self.parties[usize::from(*c)].inbox.push(message.clone());
        }
        Ok(())
    }
}

/// One shared lock's sequence of `steps` steps drawn from `seed`, the model's scripts carrying
/// `defects`: a read/write lock or a semaphore of two permits, as the seed draws.
pub fn shared_sequence(
    real: &mut Real,
    seed: u64,
    steps: usize,
    defects: Defects,
    tally: &mut Tally,
) -> Result<(), String> {
    let mut rng = Rng::new(seed);
    let eviction: Time = 1 + rng.below(3) as Time;
    let family = if rng.chance(50) {
        Family::ReadWrite
    } else {
        Family::Semaphore(2)
    };
    let mut run = SharedRun::new(real, family, eviction);
    run.model.defects = defects;
    for _ in 0..steps {
        let op = run.draw(&mut rng);
        run.step(&op, tally)?;
    }
    Ok(())
}

/// Keeps each client's hold and waits as the step's answer says.
fn follow(parties: &mut [SharedParty], op: &SharedOp, expected: &Outcome, got: &Outcome) {
    let token = match (&expected.answer, &got.answer) {
        (Answer::Token(m), Answer::Token(r)) => Some((*m, *r)),
        _ => None,
    };
    let answer = &expected.answer;
    match *op {
        SharedOp::Acquire { c, n, kind, .. } => {
            let p = &mut parties[usize::from(c)];
            if usize::from(n) == p.kinds.len() {
                p.kinds.push(kind);
            }
            p.wait = match answer {
                Answer::Busy(_) | Answer::Again => Some((n, true)),
                _ => None,
            };
            if let Some(token) = token {
                if p.guards.first().is_some_and(|&held| held != token) {
                    let lost: Vec<Tokens> = p.guards.drain(..).collect();
                    p.dropped.extend(lost);
                }
                p.guards.push(token);
            }
        }
        SharedOp::Release { c, token } => {
            let p = &mut parties[usize::from(c)];
            if let Some(at) = p.guards.iter().rposition(|&t| t == token) {
                p.guards.remove(at);
                p.dropped.push(token);
            } else {
                p.dropped.retain(|&t| t != token);
            }
        }
        SharedOp::Renew { c, .. } if *answer == Answer::Int(0) => {
            let p = &mut parties[usize::from(c)];
            let lost: Vec<Tokens> = p.guards.drain(..).collect();
            p.dropped.extend(lost);
        }
        SharedOp::Abandon { c, n, .. } => {
            let p = &mut parties[usize::from(c)];
            if p.wait.is_some_and(|(w, _)| w == n) {
                p.wait = None;
            }
        }
        SharedOp::Die(c) => parties[usize::from(c)].alive = false,
        _ => {}
    }
}
