//! One form for the state of a shared lock on both sides: its hash, its holders' lease ends, its
//! queue and its waiters' heartbeat keys, each expiry as the ticks left (rounded up). The
//! fencing counter is left out, as for exclusive locks (`../view.rs`).

use std::collections::BTreeMap;

use super::super::names::{self, LOCK, MS_PER_TICK};
use super::super::tokens::TokenPairs;
use super::super::view::{is_meta, ticks_left, Left};
use super::model_side::family_name;
use super::SharedNames;
use crate::shared_state::{Family, SharedServer};
use crate::state::Time;

/// The lock hash.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HashView {
    /// `#s`.
    pub family: Option<String>,
    /// Owner id -> holds.
    pub holds: BTreeMap<String, String>,
    /// Owner id -> `#t:<owner>` (the model's token, or the server's until matched).
    pub tokens: BTreeMap<String, u64>,
    /// Owner id -> `#g:<owner>`: the wait a grant not yet taken up was made to.
    pub grants: BTreeMap<String, String>,
    /// `#x`: the write holder.
    pub writer: Option<String>,
    pub left: Left,
}

/// The keys of one shared lock, the fencing counter aside.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SharedView {
    pub hash: Option<HashView>,
    /// Holder -> ticks until its lease ends (0: ended, not yet purged).
    pub holders: BTreeMap<String, u64>,
    pub holders_left: Option<Left>,
    pub queue: Vec<String>,
    pub queue_left: Option<Left>,
    /// Waiter id -> its heartbeat key's expiry.
    pub heartbeats: BTreeMap<String, Left>,
    /// Keys, fields and values that neither side should have.
    pub unexpected: Vec<String>,
}

fn left(expires: Time, now: Time) -> Left {
    Some(u64::from(expires.saturating_sub(now)))
}

impl SharedView {
    /// The model server's state at `now`.
    pub fn of_model(s: &SharedServer, family: Family, now: Time, n: &SharedNames) -> SharedView {
        let hash = s.hash.as_ref().map(|h| HashView {
            family: Some(family_name(family)),
            holds: (h.entries.iter())
                .map(|(c, e)| (names::owner(*c), e.count.to_string()))
                .collect(),
            tokens: (h.entries.iter())
                .map(|(c, e)| (names::owner(*c), e.token))
                .collect(),
            grants: (h.entries.iter())
                .filter_map(|(c, e)| Some((names::owner(*c), n.waiter(e.grant?))))
                .collect(),
            writer: h.writer.map(names::owner),
            left: h.expires.and_then(|e| left(e, now)),
        });
        let holders = s.holders.iter();
        SharedView {
            hash,
            holders: holders
                .map(|(c, e)| (names::owner(*c), u64::from(e.saturating_sub(now))))
                .collect(),
            holders_left: (!s.holders.is_empty())
                .then(|| s.holders_expires.and_then(|e| left(e, now))),
            queue: s.queue.iter().map(|(w, _)| n.waiter(*w)).collect(),
            queue_left: (!s.queue.is_empty()).then(|| left(s.queue_expires, now)),
            heartbeats: (s.heartbeats.iter())
                .map(|(w, e)| (n.waiter(*w), left(*e, now)))
                .collect(),
            unexpected: Vec::new(),
        }
    }

    /// The server's state, from the keys `read_state` returned, at its clock `now_ms`.
    pub fn of_real(keys: Vec<(String, String, i64, Vec<String>)>, now_ms: i64) -> SharedView {
        let mut view = SharedView::default();
        let hb_prefix = names::key(":hb:");
        for (key, kind, pttl, content) in keys {
            let expiry = ticks_left(pttl);
            match (key.as_str(), kind.as_str()) {
                (LOCK, "hash") => view.hash = Some(hash_view(&content, expiry, &mut view)),
                (k, "zset") if k == names::key(":s") => {
                    for pair in content.chunks(2) {
                        let end: i64 = pair[1].parse().unwrap_or(i64::MIN);
                        let ms = u64::try_from(end - now_ms).unwrap_or(0);
                        view.holders
                            .insert(pair[0].clone(), ms.div_ceil(MS_PER_TICK));
                    }
                    view.holders_left = Some(expiry);
                }
                (k, "list") if k == names::key(":qs") => {
                    view.queue = content;
                    view.queue_left = Some(expiry);
                }
                (k, "string") if k == names::key(":f") && pttl > 0 => {}
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

    /// Compares the model's view with the server's, matching each holder's token by its order.
    pub fn compare(
        model: &SharedView,
        mut real: SharedView,
        tokens: &mut TokenPairs,
    ) -> Result<(), String> {
        if let (Some(m), Some(r)) = (model.hash.as_ref(), real.hash.as_mut()) {
            for (owner, mt) in &m.tokens {
                if let Some(rt) = r.tokens.get_mut(owner) {
                    let observed = tokens.observe(*mt, *rt);
                    observed.map_err(|e| format!("hash #t:{owner}: {e}"))?;
                    *rt = *mt;
                }
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

fn hash_view(content: &[String], left: Left, view: &mut SharedView) -> HashView {
    let mut hash = HashView {
        left,
        ..HashView::default()
    };
    for pair in content.chunks(2) {
        let (field, value) = (pair[0].as_str(), pair.get(1).cloned().unwrap_or_default());
        if let Some(owner) = field.strip_prefix("#t:") {
            match value.parse() {
                Ok(token) => drop(hash.tokens.insert(owner.to_owned(), token)),
                Err(_) => view.unexpected.push(format!("{field} = {value}")),
            }
        } else if let Some(owner) = field.strip_prefix("#g:") {
            hash.grants.insert(owner.to_owned(), value);
        } else if field.starts_with("#m:") && is_meta(&value) {
            // what `inspect` shows of the hold: no decision of the scripts reads it
        } else if field == "#s" {
            hash.family = Some(value);
        } else if field == "#x" {
            hash.writer = Some(value);
        } else if !field.starts_with('#') {
            hash.holds.insert(field.to_owned(), value);
        } else {
            view.unexpected.push(format!("{field} = {value}"));
        }
    }
    hash
}
