//! One sequence: draw a step, run it on both sides, compare the answers, the messages and the
//! states, and keep each client's holds and waits as the answers say.

use super::model_side::ModelSide;
use super::names;
use super::ops::{answer_message, draw, Op, Party, Rng, Tokens};
use super::outcome::{Answer, Outcome};
use super::plain::follow_plain;
use super::real::Real;
use super::real_side;
use super::tally::Tally;
use super::tokens::TokenPairs;
use super::view::{PlainHolds, View};
use crate::defects::Defects;
use crate::state::{Client, Time};

/// Model processes per sequence.
pub const CLIENTS: u8 = 3;

/// Fresh tokens per tick before the clock must advance: the model's clock floor is 1000 µs a
/// tick and each fresh token may take a 64-token block, so 15 in one tick would carry its tokens
/// past the next tick's floor, which the server's clock (1 µs a µs) never sees.
const FRESH_PER_TICK: usize = 12;

/// Both sides of one sequence, and what the generator knows of its clients.
pub struct Run<'a> {
    real: &'a mut Real,
    pub model: ModelSide,
    parties: Vec<Party>,
    tokens: TokenPairs,
    fresh_in_tick: usize,
    log: Vec<String>,
    /// The model token each plain hold's number stands for.
    plain_holds: PlainHolds,
}

impl<'a> Run<'a> {
    /// A clean start on both sides, with this fair eviction (ticks).
    pub fn new(real: &'a mut Real, eviction: Time) -> Run<'a> {
        real.reset(CLIENTS);
        let alive = Party {
            alive: true,
            ..Party::default()
        };
        Run {
            real,
            model: ModelSide::new(CLIENTS, eviction),
            parties: vec![alive; usize::from(CLIENTS)],
            tokens: TokenPairs::default(),
            fresh_in_tick: 0,
            plain_holds: PlainHolds::new(),
            log: vec![format!("eviction {eviction} tick(s)")],
        }
    }

    /// The next step the generator draws (a tick when this tick has its fill of tokens). A
    /// step that answers its client's first message reads it from the inbox.
    pub fn draw(&mut self, rng: &mut Rng) -> Op {
        if self.fresh_in_tick >= FRESH_PER_TICK {
            return Op::Tick;
        }
        let op = draw(rng, &self.parties, self.model.snapshot.is_some());
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

    /// `op` with a release of [`super::findings::LAST`] bound to the client's last guard.
    pub fn resolve(&self, op: &Op) -> Op {
        match *op {
            Op::Release { c, token } if token == super::findings::LAST => {
                let p = &self.parties[usize::from(c)];
                let last = p.guards.last().or(p.dropped.last()).copied();
                Op::Release {
                    c,
                    token: last.unwrap_or(token),
                }
            }
            Op::FairAcquire { c, held, .. } if held == Some(super::findings::LAST) => {
                let mut op = op.clone();
                if let Op::FairAcquire { held, .. } = &mut op {
                    *held = self.parties[usize::from(c)].guards.first().copied();
                }
                op
            }
            _ => op.clone(),
        }
    }

    /// Runs `op` on both sides and compares them; on a disagreement, the steps so far and why.
    pub fn step(&mut self, op: &Op, tally: &mut Tally) -> Result<(), String> {
        if matches!(op, Op::Tick | Op::Restart(_)) {
            self.fresh_in_tick = 0;
        }
        let expected = self.model.step(op);
        if let (Op::PlainTake { c, n, .. }, Answer::Token(t)) = (op, &expected.answer) {
            self.plain_holds.insert((names::owner(*c), *n), *t);
        }
        let got = real_side::step(self.real, op, self.model.eviction, self.model.now);
        self.log.push(format!("{op:?} -> {expected:?}"));
        let fresh = compare(&expected, &got, &mut self.tokens)
            .and_then(|fresh| {
                let real = View::of_real(self.real.state(), &self.plain_holds);
                let model = View::of_model(&self.model.server, self.model.now);
                View::compare(&model, real, &mut self.tokens)?;
                Ok(fresh)
            })
            .map_err(|why| {
                let steps = self.log.join("\n  ");
                format!("{why}\nreal answer: {got:?}\nsteps:\n  {steps}")
            })?;
        self.fresh_in_tick += fresh;
        tally.count(op, &expected);
        follow(&mut self.parties, op, &expected, &got);
        self.deliver(op, &expected);
        Ok(())
    }

    /// Puts the step's messages in the inboxes (a restart drops what they held).
    fn deliver(&mut self, op: &Op, outcome: &Outcome) {
        if matches!(op, Op::Restart(_)) {
            self.parties.iter_mut().for_each(|p| p.inbox.clear());
        }
        for (c, message) in &outcome.messages {
            self.parties[usize::from(*c)].inbox.push(message.clone());
        }
    }
}

/// One sequence of `steps` steps drawn from `seed`, the model's scripts carrying `defects`.
pub fn sequence(
    real: &mut Real,
    seed: u64,
    steps: usize,
    defects: Defects,
    tally: &mut Tally,
) -> Result<(), String> {
    let mut rng = Rng::new(seed);
    let eviction: Time = 1 + rng.below(3) as Time;
    let mut run = Run::new(real, eviction);
    run.model.defects = defects;
    for _ in 0..steps {
        let op = run.draw(&mut rng);
        run.step(&op, tally)?;
    }
    Ok(())
}

/// Compares a step's outcomes, matching tokens by order; how many tokens were new. Messages are
/// compared per manager: the order of messages to different managers is not observable.
pub(super) fn compare(
    expected: &Outcome,
    got: &Outcome,
    tokens: &mut TokenPairs,
) -> Result<usize, String> {
    let (mut expected, mut got) = (expected.clone(), got.clone());
    expected.messages.sort_by_key(|(c, _)| *c);
    got.messages.sort_by_key(|(c, _)| *c);
    let (mine, theirs) = (expected.tokens(), got.tokens());
    if mine.len() != theirs.len() {
        return Err(format!("outcomes differ: model {expected:?}"));
    }
    let mut fresh = 0;
    for (&m, &r) in mine.iter().zip(&theirs) {
        fresh += usize::from(tokens.observe(m, r)?);
    }
    if got.with_tokens(&mine) != expected {
        return Err(format!("outcomes differ: model {expected:?}"));
    }
    Ok(fresh)
}

/// A token on both sides from the outcomes of one step.
fn pair(expected: &Outcome, got: &Outcome) -> Option<Tokens> {
    match (&expected.answer, &got.answer) {
        (Answer::Token(m), Answer::Token(r)) => Some((*m, *r)),
        _ => None,
    }
}

/// Keeps each client's holds and waits as the step's answer says.
fn follow(parties: &mut [Party], op: &Op, expected: &Outcome, got: &Outcome) {
    let token = pair(expected, got);
    let answer = &expected.answer;
    let client = |c: Client| usize::from(c);
    match *op {
        Op::Acquire { c, wait, .. } => {
            let p = &mut parties[client(c)];
            match answer {
                Answer::Token(_) => p.recorded = false,
                Answer::Busy(_) if wait > 0 => p.recorded = true,
                Answer::Fair => p.recorded = false,
                _ => {}
            }
            take(p, token);
        }
        Op::FairAcquire {
            c, n, will_wait, ..
        } => {
            let p = &mut parties[client(c)];
            if n == p.next_wait {
                p.next_wait += 1;
            }
            p.wait = match answer {
                Answer::Token(_) => None,
                _ if will_wait => Some((n, true)),
                _ => None,
            };
            if token.is_some() {
                // a fair re-entry makes a plain hold a hash
                p.plain = None;
            }
            take(p, token);
        }
        Op::Release { c, token } => {
            let p = &mut parties[client(c)];
            if let Some(at) = p.guards.iter().rposition(|&t| t == token) {
                p.guards.remove(at);
                p.dropped.push(token);
            } else {
                p.dropped.retain(|&t| t != token);
            }
        }
        Op::Renew { c, .. } if *answer == Answer::Int(0) => {
            let p = &mut parties[client(c)];
            p.plain = None;
            let lost: Vec<Tokens> = p.guards.drain(..).collect();
            p.dropped.extend(lost);
        }
        Op::Abandon { c, .. } => parties[client(c)].recorded = false,
        Op::FairAbandon { c, n } => {
            let p = &mut parties[client(c)];
            if p.wait.is_some_and(|(w, _)| w == n) {
                p.wait = None;
            }
        }
        Op::Die(c) => parties[client(c)].alive = false,
        Op::PlainTake { c, .. } | Op::PlainRelease { c, .. } | Op::RenewPlain { c, .. } => {
            follow_plain(&mut parties[client(c)], op, answer, token);
        }
        _ => {}
    }
}

/// A guard for `token`: another of the hold's, or the first of a new hold (the old guards'
/// hold is gone: they are lost).
fn take(p: &mut Party, token: Option<Tokens>) {
    let Some(token) = token else {
        return;
    };
    if p.guards.first().is_some_and(|&held| held != token) {
        p.plain = None;
        let lost: Vec<Tokens> = p.guards.drain(..).collect();
        p.dropped.extend(lost);
    }
    p.guards.push(token);
}
