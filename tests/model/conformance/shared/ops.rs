//! The operations of a shared lock's sequence, and a seeded generator that draws them as the
//! crate's managers would make them: each client's hold, its waits and its inbox decide the
//! arguments.

use super::super::ops::{Rng, Tokens};
use super::super::outcome::Message;
use crate::model::Loss;
use crate::shared_state::{Family, Kind};
use crate::state::{Client, Time};

/// One step of a shared lock's sequence. Every argument is in the step, so a printed sequence
/// says exactly what ran.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SharedOp {
    /// shared_acquire.lua for wait `n` (of `kind`) of the client, which will wait.
    Acquire {
        c: Client,
        lease: Time,
        queued: bool,
        n: u8,
        kind: Kind,
        held: Option<Tokens>,
    },
    /// shared_release.lua bound by `token`.
    Release {
        c: Client,
        token: Tokens,
    },
    /// renew.lua for the client's hold.
    Renew {
        c: Client,
        lease: Time,
    },
    /// shared_abandon.lua for wait `n`.
    Abandon {
        c: Client,
        n: u8,
        kind: Kind,
    },
    /// heartbeat.lua for wait `n` of a `:qs` queue.
    Heartbeat {
        c: Client,
        n: u8,
        kind: Kind,
    },
    /// grant_on.lua on a shared lock.
    GrantOn {
        c: Client,
    },
    Tick,
    Snapshot,
    Restart(Loss),
    /// The client's process dies: its manager stops listening.
    Die(Client),
}

impl SharedOp {
    /// The client whose step this is (none for the environment's).
    pub fn client(&self) -> Option<Client> {
        match *self {
            SharedOp::Acquire { c, .. }
            | SharedOp::Release { c, .. }
            | SharedOp::Renew { c, .. }
            | SharedOp::Abandon { c, .. }
            | SharedOp::Heartbeat { c, .. }
            | SharedOp::GrantOn { c } => Some(c),
            _ => None,
        }
    }

    /// The step's kind, for the run's tally: its name without its arguments.
    pub fn name(&self) -> String {
        let text = format!("{self:?}");
        let end = text.find([' ', '(']).unwrap_or(text.len());
        match self {
            SharedOp::Restart(loss) => format!("Restart({loss:?})"),
            _ => format!("shared {}", &text[..end]),
        }
    }
}

/// What the generator knows of one client: its hold and its waits.
#[derive(Clone, Debug, Default)]
pub struct SharedParty {
    pub alive: bool,
    /// The tokens of its guards: all the one hold's (a re-entry adds one).
    pub guards: Vec<Tokens>,
    /// Tokens of guards released or lost (a late release may still come with one).
    pub dropped: Vec<Tokens>,
    /// The current wait and whether it joined the queue.
    pub wait: Option<(u8, bool)>,
    /// The kind of each wait made, by number.
    pub kinds: Vec<Kind>,
    /// Messages its manager got and has not read yet.
    pub inbox: Vec<Message>,
}

/// The leases a request may ask for, in ticks.
const LEASES: u64 = 3;

fn lease(rng: &mut Rng) -> Time {
    1 + rng.below(LEASES) as Time
}

/// A kind of hold of `family`: reads more often than writes.
fn kind(rng: &mut Rng, family: Family) -> Kind {
    match family {
        Family::ReadWrite if rng.chance(60) => Kind::Read,
        Family::ReadWrite => Kind::Write,
        Family::Semaphore(_) => Kind::Permit,
    }
}

/// A wait of `p` to act on: its current one mostly, an earlier one at times.
fn some_wait(rng: &mut Rng, p: &SharedParty) -> Option<(u8, Kind)> {
    let n = match p.wait {
        Some((n, _)) if rng.chance(75) => n,
        _ if !p.kinds.is_empty() => rng.below(p.kinds.len() as u64) as u8,
        _ => return None,
    };
    Some((n, p.kinds[usize::from(n)]))
}

/// Draws the next step for `parties` of a `family` lock; `snapshot`: one was taken.
pub fn draw(rng: &mut Rng, parties: &[SharedParty], family: Family, snapshot: bool) -> SharedOp {
    let alive: Vec<Client> = (0..parties.len() as Client)
        .filter(|&c| parties[usize::from(c)].alive)
        .collect();
    let c = alive[rng.below(alive.len() as u64) as usize];
    loop {
        let roll = rng.below(100);
        let drawn = match roll {
            0..=79 => client_step(rng, c, &parties[usize::from(c)], family, roll),
            80..=89 => Some(SharedOp::Tick),
            90 => Some(SharedOp::Snapshot),
            91 => Some(SharedOp::Restart(Loss::Nothing)),
            92 => Some(SharedOp::Restart(Loss::Everything)),
            93 if snapshot => Some(SharedOp::Restart(Loss::ToSnapshot)),
            94 if alive.len() > 1 => Some(SharedOp::Die(c)),
            _ => None,
        };
        if let Some(op) = drawn {
            return op;
        }
    }
}

/// A step of client `c` for `roll` (below 80), if `p` can take it.
fn client_step(
    rng: &mut Rng,
    c: Client,
    p: &SharedParty,
    family: Family,
    roll: u64,
) -> Option<SharedOp> {
    let queued = p.wait.filter(|&(_, queued)| queued).map(|(n, _)| n);
    match roll {
        // a holder re-enters at times only: most requests of a process are fresh
        0..=23 if p.guards.is_empty() || rng.chance(25) => Some(acquire(rng, c, p, family)),
        24..=37 => p.guards.last().map(|&token| SharedOp::Release { c, token }),
        38..=40 => (!p.dropped.is_empty()).then(|| SharedOp::Release {
            c,
            token: p.dropped[rng.below(p.dropped.len() as u64) as usize],
        }),
        41..=46 if !p.guards.is_empty() || rng.chance(20) => Some(SharedOp::Renew {
            c,
            lease: lease(rng),
        }),
        47..=51 => some_wait(rng, p).map(|(n, kind)| SharedOp::Abandon { c, n, kind }),
        52..=59 => queued
            .map(|n| (n, p.kinds[usize::from(n)]))
            .or_else(|| some_wait(rng, p))
            .map(|(n, kind)| SharedOp::Heartbeat { c, n, kind }),
        60..=62 => Some(SharedOp::GrantOn { c }),
        63..=79 => p.inbox.first().map(|message| answer_message(c, p, message)),
        _ => None,
    }
}

/// What the manager of `c` does with the first message in its inbox, as `shared_clients.rs`
/// reads one: a grant is taken up by its wait's confirming attempt, or passed on when that wait
/// is gone.
pub fn answer_message(c: Client, p: &SharedParty, message: &Message) -> SharedOp {
    let n = match message {
        Message::Grant(waiter, _) => waiter.split('|').nth(1).and_then(|n| n.parse().ok()),
        _ => None,
    };
    let n: u8 = n.unwrap_or(0);
    let kind = p.kinds.get(usize::from(n)).copied().unwrap_or(Kind::Read);
    match p.wait {
        Some((current, queued)) if current == n => SharedOp::Acquire {
            c,
            lease: 1,
            queued,
            n,
            kind,
            held: p.guards.first().copied(),
        },
        _ => SharedOp::Abandon { c, n, kind },
    }
}

fn acquire(rng: &mut Rng, c: Client, p: &SharedParty, family: Family) -> SharedOp {
    let (n, queued, kind) = match p.wait {
        Some((n, queued)) if rng.chance(80) => (n, queued, p.kinds[usize::from(n)]),
        _ => (p.kinds.len() as u8, false, kind(rng, family)),
    };
    SharedOp::Acquire {
        c,
        lease: lease(rng),
        queued,
        n,
        kind,
        held: p.guards.first().copied(),
    }
}
