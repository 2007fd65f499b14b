//! One form for the state of both sides: the lock's hash, its fair queue, the waiters'
//! heartbeat keys and the waiting managers, each with what is left of its expiry in ticks.
//!
//! The fencing counter (`:f`) is left out: the model retires a token block whenever a hold ends
//! within its tick (a tick is 1000 µs of its clock floor), the server only when the hold lasted
//! less than 64 µs of its real clock, so the counter's presence is a matter of time scale. The
//! tokens it yields are compared by their order (`tokens.rs`).

use std::collections::BTreeMap;

use super::names::{self, MS_PER_TICK};
use super::tokens::TokenPairs;
use crate::state::{FairMark, Server, Time};

/// What is left of a key's expiry, in whole ticks (rounded up); `None`: no expiry.
pub type Left = Option<u64>;

/// The lock hash.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LockView {
    /// Owner id -> holds.
    pub holds: BTreeMap<String, String>,
    /// `#t`: the model's token, or the server's until matched.
    pub token: Option<u64>,
    /// `#w`.
    pub marked: bool,
    /// `#f`: `1` or a waiter id.
    pub fair: Option<String>,
    pub left: Left,
}

/// The lock as a string (the plain path's).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlainView {
    pub owner: String,
    pub fair: bool,
    /// The hold, by the model's token (the server's number for it mapped to that token).
    pub hold: Option<u64>,
    pub left: Left,
}

/// Which model token each plain hold (owner id, number) stands for.
pub type PlainHolds = BTreeMap<(String, u8), u64>;

/// The keys of one lock, the fencing counter aside.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct View {
    pub lock: Option<LockView>,
    pub plain: Option<PlainView>,
    pub queue: Vec<String>,
    /// The queue key's expiry (only while it holds waiters: an empty list is no key).
    pub queue_left: Option<Left>,
    /// Waiter id -> its heartbeat key's expiry.
    pub heartbeats: BTreeMap<String, Left>,
    /// Waiting managers, in arrival order.
    pub waiters: Vec<String>,
    pub waiters_left: Option<Left>,
    /// Keys, fields and values that neither side should have.
    pub unexpected: Vec<String>,
}

fn left(expires: Time, now: Time) -> Left {
    Some(u64::from(expires.saturating_sub(now)))
}

impl View {
    /// The model server's state at `now`.
    pub fn of_model(s: &Server, now: Time) -> View {
        let lock = s.lock.as_ref().map(|l| LockView {
            holds: l
                .holds
                .iter()
                .map(|(c, n)| (names::owner(*c), n.to_string()))
                .collect(),
            token: l.token,
            marked: l.marked,
            fair: l.fair.as_ref().map(|f| match f {
                FairMark::Any => "1".to_owned(),
                FairMark::Wait(w) => names::waiter(*w),
            }),
            left: l.expires.and_then(|e| left(e, now)),
        });
        let plain = s.plain.as_ref().map(|p| PlainView {
            owner: names::owner(p.owner),
            fair: p.fair,
            hold: Some(p.hold),
            left: left(p.expires, now),
        });
        View {
            lock,
            plain,
            queue: s.queue.iter().map(|w| names::waiter(*w)).collect(),
            queue_left: (!s.queue.is_empty()).then(|| left(s.queue_expires, now)),
            heartbeats: s
                .heartbeats
                .iter()
                .map(|(w, e)| (names::waiter(*w), left(*e, now)))
                .collect(),
            waiters: s.waiters.iter().map(|m| names::manager(*m)).collect(),
            waiters_left: (!s.waiters.is_empty()).then(|| left(s.waiters_expires, now)),
            unexpected: Vec::new(),
        }
    }

    /// The server's state, from the keys `read_state` returned: `(key, type, pttl, content)`.
    pub fn of_real(keys: Vec<(String, String, i64, Vec<String>)>, holds: &PlainHolds) -> View {
        let mut view = View::default();
        let hb_prefix = names::key(":hb:");
        for (key, kind, pttl, content) in keys {
            let expiry = ticks_left(pttl);
            match (key.as_str(), kind.as_str()) {
                (names::LOCK, "hash") => view.lock = Some(lock_view(&content, expiry, &mut view)),
                (names::LOCK, "string") => view.plain = plain_view(&content, expiry, holds),
                (k, "list") if k == names::key(":ql") => {
                    view.queue = content;
                    view.queue_left = Some(expiry);
                }
                (k, "zset") if k == names::key(":w") => {
                    // members and scores (arrival times): the order is what counts
                    view.waiters = content.into_iter().step_by(2).collect();
                    view.waiters_left = Some(expiry);
                }
                // the fencing counter: not compared, but it must expire (60 s)
                (k, "string") if k == names::key(":f") && pttl > 0 => {}
                // a heartbeat key's value is the wait's meta for `inspect` (`meta_of`), which no
                // decision of the scripts reads
                (k, "string")
                    if k.starts_with(&hb_prefix) && content.iter().all(|v| is_meta(v)) =>
                {
                    view.heartbeats
                        .insert(k[hb_prefix.len()..].to_owned(), expiry);
                }
                _ => view.unexpected.push(format!("{key} ({kind}): {content:?}")),
            }
        }
        view
    }

    /// Compares the model's view with the server's, matching the lock's token by its order.
    pub fn compare(model: &View, mut real: View, tokens: &mut TokenPairs) -> Result<(), String> {
        if let (Some(m), Some(r)) = (model.lock.as_ref(), real.lock.as_mut()) {
            if let (Some(mt), Some(rt)) = (m.token, r.token) {
                tokens
                    .observe(mt, rt)
                    .map_err(|e| format!("lock hash #t: {e}"))?;
                r.token = Some(mt);
            }
        }
        if *model == real {
            return Ok(());
        }
        Err(format!(
            "states differ:\n  model: {model:?}\n  real:  {real:?}"
        ))
    }
}

/// A `PTTL` in whole ticks, rounded up (the real time a sequence takes is far below a tick).
pub fn ticks_left(pttl: i64) -> Left {
    u64::try_from(pttl).ok().map(|ms| ms.div_ceil(MS_PER_TICK))
}

/// A plain lock's value: `!` in fair mode, the owner id, `|`, the hold's number, then tabs.
fn plain_view(content: &[String], left: Left, holds: &PlainHolds) -> Option<PlainView> {
    let value = content.first()?;
    let fair = value.starts_with('!');
    let (owner, rest) = value.trim_start_matches('!').split_once('|')?;
    let n: u8 = rest.split('\t').next()?.parse().ok()?;
    Some(PlainView {
        owner: owner.to_owned(),
        fair,
        hold: holds.get(&(owner.to_owned(), n)).copied(),
        left,
    })
}

fn lock_view(content: &[String], left: Left, view: &mut View) -> LockView {
    let mut lock = LockView {
        holds: BTreeMap::new(),
        token: None,
        marked: false,
        fair: None,
        left,
    };
    for pair in content.chunks(2) {
        let (field, value) = (pair[0].as_str(), pair.get(1).cloned().unwrap_or_default());
        match field {
            "#t" => match value.parse() {
                Ok(token) => lock.token = Some(token),
                Err(_) => view.unexpected.push(format!("#t = {value}")),
            },
            "#w" if value == "1" => lock.marked = true,
            // what `inspect` shows of the hold (`meta_of`): no decision of the scripts reads it
            "#m" if is_meta(&value) => {}
            "#f" => lock.fair = Some(value),
            f if !f.starts_with('#') => {
                lock.holds.insert(f.to_owned(), value);
            }
            _ => view.unexpected.push(format!("{field} = {value}")),
        }
    }
    lock
}

/// Whether `value` is the meta `common.lua`'s `meta_of` writes: server µs, a tab, the label, a
/// tab, the request.
pub fn is_meta(value: &str) -> bool {
    let mut parts = value.splitn(3, '\t');
    let began = parts.next().is_some_and(|us| us.parse::<u64>().is_ok());
    began && parts.count() == 2
}
