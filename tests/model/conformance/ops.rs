//! The operations a sequence is made of, and a seeded generator that draws them as the crate's
//! managers would make them: each client's holds, its wait and its flags decide the arguments.

use super::outcome::Message;
use crate::model::Loss;
use crate::state::{Client, Time};

/// A token on both sides: (model, real).
pub type Tokens = (u64, u64);

/// One step of a sequence: a script call of a client, or a step of the environment. Every
/// argument is in the step, so a printed sequence says exactly what ran.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    /// acquire.lua; `wait`: 0 '', 1 'w', 2 'wr'.
    Acquire {
        c: Client,
        lease: Time,
        wait: u8,
        held: Option<Tokens>,
    },
    /// fair_acquire.lua for wait `n` of the client; `plain`: the held hold is its plain hold
    /// `n` in fair mode (the script gets its value).
    FairAcquire {
        c: Client,
        lease: Time,
        will_wait: bool,
        queued: bool,
        n: u8,
        held: Option<Tokens>,
        plain: Option<u8>,
    },
    /// The plain path's commands for the client's plain hold `n` (`SET NX PX`, the counter, the
    /// clock, whether fair requests queue), and its undo when they queue.
    PlainTake {
        c: Client,
        lease: Time,
        fair: bool,
        n: u8,
    },
    /// plain_release.lua for plain hold `n` made under `token`; `last`: the last token handed
    /// out under it, as an offset from its token (none: the server's clock passed it).
    PlainRelease {
        c: Client,
        fair: bool,
        n: u8,
        token: Tokens,
        last: Option<u8>,
    },
    /// renew.lua for plain hold `n` (by its value).
    RenewPlain {
        c: Client,
        lease: Time,
        fair: bool,
        n: u8,
        token: Tokens,
    },
    /// release.lua bound by `token`.
    Release {
        c: Client,
        token: Tokens,
    },
    /// renew.lua for the client's hold.
    Renew {
        c: Client,
        lease: Time,
    },
    /// abandon.lua: the manager waits no more (forget '1').
    Abandon {
        c: Client,
        pass_on: bool,
    },
    /// fair_abandon.lua for wait `n`.
    FairAbandon {
        c: Client,
        n: u8,
    },
    /// heartbeat.lua for wait `n`.
    Heartbeat {
        c: Client,
        n: u8,
    },
    /// grant_on.lua.
    GrantOn {
        c: Client,
    },
    Tick,
    Snapshot,
    Restart(Loss),
    /// The client's process dies: its manager stops listening.
    Die(Client),
}

impl Op {
    /// The client whose step this is (none for the environment's).
    pub fn client(&self) -> Option<Client> {
        match *self {
            Op::Acquire { c, .. }
            | Op::FairAcquire { c, .. }
            | Op::Release { c, .. }
            | Op::Renew { c, .. }
            | Op::Abandon { c, .. }
            | Op::FairAbandon { c, .. }
            | Op::Heartbeat { c, .. }
            | Op::GrantOn { c }
            | Op::PlainTake { c, .. }
            | Op::PlainRelease { c, .. }
            | Op::RenewPlain { c, .. } => Some(c),
            _ => None,
        }
    }
}

/// What the generator knows of one client: its holds and its waits.
#[derive(Clone, Debug, Default)]
pub struct Party {
    pub alive: bool,
    /// The tokens of its guards: all the one hold's.
    pub guards: Vec<Tokens>,
    /// Tokens of guards released or lost (a late release may still come with one).
    pub dropped: Vec<Tokens>,
    /// An exclusive attempt found the lock busy and recorded this manager as waiting.
    pub recorded: bool,
    /// The current fair wait and whether it joined the queue.
    pub wait: Option<(u8, bool)>,
    pub next_wait: u8,
    /// Messages its manager got and has not read yet.
    pub inbox: Vec<Message>,
    /// Its hold is its plain hold of this number, in this mode.
    pub plain: Option<(u8, bool)>,
    /// Plain holds released or lost: number, mode and token (a late release may still come).
    pub dropped_plain: Vec<(u8, bool, Tokens)>,
    /// The number of its next plain hold.
    pub next_plain: u8,
}

/// A seeded generator (splitmix64): the same seed draws the same sequence.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number below `n` (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// True with probability `p` percent.
    pub fn chance(&mut self, p: u64) -> bool {
        self.below(100) < p
    }
}

/// The leases a request may ask for, in ticks.
const LEASES: u64 = 3;

fn lease(rng: &mut Rng) -> Time {
    1 + rng.below(LEASES) as Time
}

/// A wait of `p` to act on: its current one mostly, an earlier one at times.
fn some_wait(rng: &mut Rng, p: &Party) -> Option<u8> {
    match p.wait {
        Some((n, _)) if rng.chance(75) => Some(n),
        _ if p.next_wait > 0 => Some(rng.below(u64::from(p.next_wait)) as u8),
        _ => None,
    }
}

/// Draws the next step for `parties`; `snapshot`: one was taken.
pub fn draw(rng: &mut Rng, parties: &[Party], snapshot: bool) -> Op {
    let alive: Vec<Client> = (0..parties.len() as Client)
        .filter(|&c| parties[usize::from(c)].alive)
        .collect();
    let c = alive[rng.below(alive.len() as u64) as usize];
    loop {
        let roll = rng.below(100);
        let drawn = match roll {
            0..=79 => client_step(rng, c, &parties[usize::from(c)], roll),
            80..=89 => Some(Op::Tick),
            90 => Some(Op::Snapshot),
            91 => Some(Op::Restart(Loss::Nothing)),
            92 => Some(Op::Restart(Loss::Everything)),
            93 if snapshot => Some(Op::Restart(Loss::ToSnapshot)),
            94 if alive.len() > 1 => Some(Op::Die(c)),
            _ => None,
        };
        if let Some(op) = drawn {
            return op;
        }
    }
}

/// A step of client `c` for `roll` (below 80), if `p` can take it.
fn client_step(rng: &mut Rng, c: Client, p: &Party, roll: u64) -> Option<Op> {
    if let Some(op) = super::plain::plain_step(rng, c, p, roll) {
        return Some(op);
    }
    // an exclusive plain hold is a cohort leader's, whose owner id is made for it: no other
    // request of that owner asks for the lock
    if roll <= 29 && p.plain.is_some_and(|(_, fair)| !fair) {
        return None;
    }
    let held = p.guards.first().copied();
    let queued = p.wait.filter(|&(_, queued)| queued).map(|(n, _)| n);
    match roll {
        0..=13 => Some(acquire(rng, c, p, held)),
        14..=29 => Some(fair_acquire(rng, c, p, held)),
        // (a plain hold is released by plain_release.lua: `plain.rs`)
        30..=41 if p.plain.is_none() => p.guards.last().map(|&token| Op::Release { c, token }),
        42..=43 => (!p.dropped.is_empty()).then(|| Op::Release {
            c,
            token: p.dropped[rng.below(p.dropped.len() as u64) as usize],
        }),
        // (a plain hold is renewed by its value: `plain.rs`)
        44..=49 if p.plain.is_none() && (!p.guards.is_empty() || rng.chance(20)) => {
            Some(Op::Renew {
                c,
                lease: lease(rng),
            })
        }
        50..=53 => Some(Op::Abandon {
            c,
            pass_on: rng.chance(50),
        }),
        54..=57 => some_wait(rng, p).map(|n| Op::FairAbandon { c, n }),
        58..=65 => queued
            .or_else(|| some_wait(rng, p))
            .map(|n| Op::Heartbeat { c, n }),
        66..=68 => Some(Op::GrantOn { c }),
        69..=79 => p.inbox.first().map(|message| answer_message(c, p, message)),
        _ => None,
    }
}

/// What the manager of `c` does with the first message in its inbox, as `clients.rs` reads
/// one: a wake-up makes its waiting request try again ('wr'), or is passed on when none waits; a
/// grant is taken up by its wait's confirming attempt, or passed on when that wait is gone.
pub fn answer_message(c: Client, p: &Party, message: &Message) -> Op {
    let held = p.guards.first().copied();
    match message {
        Message::Grant(waiter, _) => {
            let n = waiter
                .rsplit('|')
                .next()
                .and_then(|n| n.parse().ok())
                .unwrap_or(0);
            match p.wait {
                Some((current, queued)) if current == n => Op::FairAcquire {
                    c,
                    lease: 1,
                    will_wait: true,
                    queued,
                    n,
                    held,
                    plain: fair_plain(p),
                },
                _ => Op::FairAbandon { c, n },
            }
        }
        _ if p.recorded => Op::Acquire {
            c,
            lease: 1,
            wait: 2,
            held,
        },
        _ => Op::Abandon { c, pass_on: true },
    }
}

fn acquire(rng: &mut Rng, c: Client, p: &Party, held: Option<Tokens>) -> Op {
    let wait = if !p.guards.is_empty() {
        // a re-entry does not wait
        0
    } else if p.recorded && rng.chance(80) {
        2
    } else {
        u8::from(rng.chance(70))
    };
    Op::Acquire {
        c,
        lease: lease(rng),
        wait,
        held,
    }
}

fn fair_acquire(rng: &mut Rng, c: Client, p: &Party, held: Option<Tokens>) -> Op {
    let (n, queued) = match p.wait {
        Some(wait) if rng.chance(80) => wait,
        _ => (p.next_wait, false),
    };
    Op::FairAcquire {
        c,
        lease: lease(rng),
        will_wait: queued || rng.chance(85),
        queued,
        n,
        held,
        plain: fair_plain(p),
    }
}

/// The number of the plain hold of `p` when it is one in fair mode (a fair re-entry gives the
/// script its value).
fn fair_plain(p: &Party) -> Option<u8> {
    p.plain.filter(|&(_, fair)| fair).map(|(n, _)| n)
}
