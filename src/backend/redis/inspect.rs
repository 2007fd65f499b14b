//! `inspect` and `list` on Redis: one lock's whole state in one read-only script call
//! (`inspect.lua`), and the locks of a namespace found with SCAN, never KEYS, which would block
//! the server while it walks every key.

use std::collections::HashMap;
use std::time::Duration;

use super::call::Reads;
use super::names;
use super::{slot_hint, RedisBackend};
use crate::error::BoxError;
use crate::options::Mode;
use crate::state::{manager_of, shared_mode, HolderState, LockFamily, LockState, WaiterState};
use crate::waiters::LockId;

/// How many waiters of each queue one inspection returns at most: a queue of thousands (a killed
/// process's dead waiters) must not make one read a large reply.
pub(crate) const MAX_WAITERS_SHOWN: usize = 1000;

/// How many keys one SCAN step asks the server to look at.
const SCAN_COUNT: usize = 500;

/// What `inspect.lua` returns (see there).
type Snapshot = (
    String,
    String,
    i64,
    Option<String>,
    Vec<String>,
    Vec<String>,
    Vec<String>,
    Vec<String>,
    Vec<String>,
    Option<String>,
);

impl RedisBackend {
    /// The state of lock `id` (named `key` in the answer), read in one script call.
    pub(crate) async fn inspect(&self, id: &LockId, key: &str) -> Result<LockState, BoxError> {
        let others = [
            names::waiters(id),
            names::queue(id),
            names::shared_queue(id),
            names::holders(id),
            names::fence(id),
        ];
        let mut call = self.lock_call(&self.scripts.inspect, id, &others);
        call.arg(MAX_WAITERS_SHOWN);
        let snapshot: Snapshot = self.invoke(slot_hint(id), &call).await?;
        Ok(read_snapshot(key, snapshot))
    }

    /// The held or waited-for locks whose names start with `prefix`, `limit` at most, in the
    /// order SCAN finds them; `None` on a cluster (SCAN would have to walk every master).
    pub(crate) async fn list(
        &self,
        prefix: &str,
        limit: usize,
    ) -> Result<Option<Vec<LockState>>, BoxError> {
        if self.scripts.declare_keys {
            return Ok(None);
        }
        let start = format!("{{{}:", self.keys.namespace());
        let pattern = format!(
            "{}{}*",
            glob_escape(&start),
            glob_escape(&names::escape(prefix))
        );
        let (mut cursor, mut found) = (0_u64, Vec::new());
        let mut seen = std::collections::HashSet::new();
        loop {
            let mut pipe = redis::pipe();
            pipe.cmd("SCAN")
                .arg(cursor)
                .arg("MATCH")
                .arg(&pattern)
                .arg("COUNT")
                .arg(SCAN_COUNT);
            let ((next, keys),): ((u64, Vec<String>),) = self.invoke(0, &Reads(pipe)).await?;
            for lock in keys.iter().filter_map(|key| lock_of(key, &start)) {
                if found.len() >= limit || !seen.insert(lock.to_owned()) {
                    continue;
                }
                let name = names::unescape(&lock[start.len()..lock.len() - 1]);
                let state = self.inspect(&LockId::new(lock), &name).await?;
                if !state.is_idle() {
                    found.push(state);
                }
            }
            cursor = next;
            if cursor == 0 || found.len() >= limit {
                return Ok(Some(found));
            }
        }
    }
}

/// `text` with the characters SCAN's MATCH reads as a pattern escaped.
fn glob_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// The lock a key found by SCAN belongs to, when it tells that the lock is held or waited for:
/// the lock hash (or plain lock) itself, a queue, or the waiting managers. Counters, heartbeats
/// and holder sets go with one of those.
fn lock_of<'a>(key: &'a str, start: &str) -> Option<&'a str> {
    let end = key.strip_prefix(start)?.find('}')? + start.len();
    let (lock, suffix) = key.split_at(end + 1);
    matches!(suffix, "" | ":w" | ":ql" | ":qs").then_some(lock)
}

/// The state `snapshot` describes, for the lock named `key`.
fn read_snapshot(key: &str, snapshot: Snapshot) -> LockState {
    let (now_us, kind, pttl, plain, fields, shared, queue, shared_queue, managers, fence) =
        snapshot;
    let now_us: u64 = now_us.parse().unwrap_or(0);
    let lease = u64::try_from(pttl).ok().map(Duration::from_millis);
    let mut state = LockState {
        key: key.to_owned(),
        family: None,
        holders: Vec::new(),
        waiters: Vec::new(),
        last_token: fence.and_then(|fence| fence.parse().ok()),
    };
    match (kind.as_str(), plain) {
        ("string", Some(value)) => plain_holder(&mut state, &value, lease),
        ("hash", _) => hash_holders(&mut state, &fields, &shared, now_us / 1000, lease),
        _ => {}
    }
    if state.family.is_none() && !queue.is_empty() {
        state.family = Some(LockFamily::Fair);
    }
    for waiter in queue {
        state.waiters.push(waiter_state(waiter, Mode::Fair, None));
    }
    for waiter in shared_queue {
        let kind = waiter.chars().next_back().unwrap_or('n');
        let mode = shared_mode(kind, state.family);
        state.waiters.push(waiter_state(waiter, mode, None));
    }
    for pair in managers.chunks_exact(2) {
        let since: u64 = pair[1].parse().unwrap_or(now_us);
        let waited = Duration::from_micros(now_us.saturating_sub(since));
        let waiter = waiter_state(pair[0].clone(), Mode::Exclusive, Some(waited));
        state.waiters.push(waiter);
    }
    let tokens = state.holders.iter().filter_map(|holder| holder.token);
    state.last_token = tokens.chain(state.last_token).max();
    state
}

/// One waiter, named `waiter`.
fn waiter_state(waiter: String, mode: Mode, waited: Option<Duration>) -> WaiterState {
    WaiterState {
        manager: manager_of(&waiter).to_owned(),
        waiter,
        mode,
        waited,
        label: None,
    }
}

/// The holder of a plain lock (`!?<owner>|<n>`): one hold, whose token only its holder knows.
fn plain_holder(state: &mut LockState, value: &str, lease: Option<Duration>) {
    let fair = value.starts_with('!');
    let owner = value
        .trim_start_matches('!')
        .split('|')
        .next()
        .unwrap_or("");
    state.family = Some(if fair {
        LockFamily::Fair
    } else {
        LockFamily::Exclusive
    });
    state.holders.push(HolderState {
        owner: owner.to_owned(),
        manager: manager_of(owner).to_owned(),
        mode: if fair { Mode::Fair } else { Mode::Exclusive },
        token: None,
        count: 1,
        lease_left: lease,
        held_for: None,
        label: None,
        request: None,
    });
}

/// The holders of a lock hash (`fields`: its fields and values), with the expiries of a shared
/// lock's holds (`shared`: owners and server ms) read at `now_ms`.
fn hash_holders(
    state: &mut LockState,
    fields: &[String],
    shared: &[String],
    now_ms: u64,
    lease: Option<Duration>,
) {
    let fields: HashMap<&str, &str> = fields
        .chunks_exact(2)
        .map(|pair| (pair[0].as_str(), pair[1].as_str()))
        .collect();
    let count = |owner: &str| fields.get(owner).and_then(|n| n.parse().ok()).unwrap_or(1);
    let token = |field: &str| fields.get(field).and_then(|t| t.parse().ok());
    let family = match fields.get("#s") {
        Some(&"rw") => LockFamily::ReadWrite,
        Some(family) => LockFamily::Semaphore(family[1..].parse().unwrap_or(0)),
        None if fields.contains_key("#f") => LockFamily::Fair,
        None => LockFamily::Exclusive,
    };
    state.family = Some(family);
    if matches!(family, LockFamily::Exclusive | LockFamily::Fair) {
        let mode = if family == LockFamily::Fair {
            Mode::Fair
        } else {
            Mode::Exclusive
        };
        for owner in fields.keys().filter(|field| !field.starts_with('#')) {
            state.holders.push(HolderState {
                owner: (*owner).to_owned(),
                manager: manager_of(owner).to_owned(),
                mode,
                token: token("#t"),
                count: count(owner),
                lease_left: lease,
                held_for: None,
                label: None,
                request: None,
            });
        }
        return;
    }
    for pair in shared.chunks_exact(2) {
        let (owner, expiry) = (pair[0].as_str(), pair[1].parse().unwrap_or(0_u64));
        // a hold whose lease ran out is gone, though no script purged it yet
        if expiry <= now_ms {
            continue;
        }
        let mode = match family {
            LockFamily::Semaphore(n) => Mode::Semaphore(n),
            _ if fields.get("#x") == Some(&owner) => Mode::Write,
            _ => Mode::Read,
        };
        state.holders.push(HolderState {
            owner: owner.to_owned(),
            manager: manager_of(owner).to_owned(),
            mode,
            token: token(&format!("#t:{owner}")),
            count: count(owner),
            lease_left: Some(Duration::from_millis(expiry - now_ms)),
            held_for: None,
            label: None,
            request: None,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_keys_that_say_a_lock_is_used_name_it() {
        let start = "{ns:";
        assert_eq!(lock_of("{ns:a%3Ab}", start), Some("{ns:a%3Ab}"));
        assert_eq!(lock_of("{ns:a}:ql", start), Some("{ns:a}"));
        assert_eq!(lock_of("{ns:a}:w", start), Some("{ns:a}"));
        assert_eq!(lock_of("{ns:a}:f", start), None);
        assert_eq!(lock_of("{ns:a}:hb:m:1|1", start), None);
        assert_eq!(lock_of("{other:a}", start), None);
        assert_eq!(glob_escape("{a*b?[c]\\}"), "{a\\*b\\?\\[c\\]\\\\}");
    }
}
