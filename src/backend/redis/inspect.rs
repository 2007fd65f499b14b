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
    Vec<String>,
);

/// What the scripts record of a hold or a wait for `inspect` (`meta_of` in `common.lua`): when it
/// began (server µs), its manager's process label and the request it serves, tab-separated.
#[derive(Debug, Default)]
struct Meta {
    age: Option<Duration>,
    label: Option<String>,
    request: Option<String>,
}

impl Meta {
    /// `text` read at the server's clock `now_us`; empty parts are `None`.
    fn read(text: &str, now_us: u64) -> Meta {
        let mut parts = text.splitn(3, '\t');
        let began = parts.next().and_then(|us| us.parse::<u64>().ok());
        let some = |part: Option<&str>| part.filter(|p| !p.is_empty()).map(str::to_owned);
        Meta {
            age: began.map(|us| Duration::from_micros(now_us.saturating_sub(us))),
            label: some(parts.next()),
            request: some(parts.next()),
        }
    }
}

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
    /// order SCAN finds them (on a cluster, master by master).
    pub(crate) async fn list(
        &self,
        prefix: &str,
        limit: usize,
    ) -> Result<Vec<LockState>, BoxError> {
        let mut found = Vec::new();
        // a lock seen used may be idle once read: look further, up to a bound
        for (id, name) in self.scan_locks(prefix, limit.saturating_mul(4)).await? {
            let state = self.inspect(&id, &name).await?;
            if !state.is_idle() {
                found.push(state);
            }
            if found.len() >= limit {
                break;
            }
        }
        Ok(found)
    }

    /// The locks (their ids and names) whose names start with `prefix` and whose keys say they
    /// are held or waited for, `limit` at most, found with SCAN.
    pub(crate) async fn scan_locks(
        &self,
        prefix: &str,
        limit: usize,
    ) -> Result<Vec<(LockId, String)>, BoxError> {
        let start = format!("{{{}:", self.keys.namespace());
        let pattern = format!(
            "{}{}*",
            glob_escape(&start),
            glob_escape(&names::escape(prefix))
        );
        let mut found = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for node in self.scan_nodes().await? {
            let mut cursor = 0_u64;
            loop {
                let (next, keys) = self.scan_step(node.as_ref(), cursor, &pattern).await?;
                for lock in keys.iter().filter_map(|key| lock_of(key, &start)) {
                    if found.len() < limit && seen.insert(lock.to_owned()) {
                        let name = names::unescape(&lock[start.len()..lock.len() - 1]);
                        found.push((LockId::new(lock), name));
                    }
                }
                cursor = next;
                if cursor == 0 || found.len() >= limit {
                    break;
                }
            }
        }
        Ok(found)
    }

    /// The servers SCAN must walk: the one server (`None`), or every master of a cluster.
    async fn scan_nodes(&self) -> Result<Vec<Option<(String, u16)>>, BoxError> {
        #[cfg(feature = "cluster")]
        if self.cluster.is_some() {
            return Ok(self.masters().await?.into_iter().map(Some).collect());
        }
        Ok(vec![None])
    }

    /// One SCAN step from `cursor` on `node` (`None`: the one server).
    async fn scan_step(
        &self,
        node: Option<&(String, u16)>,
        cursor: u64,
        pattern: &str,
    ) -> Result<(u64, Vec<String>), BoxError> {
        let mut scan = redis::cmd("SCAN");
        scan.arg(cursor)
            .arg("MATCH")
            .arg(pattern)
            .arg("COUNT")
            .arg(SCAN_COUNT);
        #[cfg(feature = "cluster")]
        if let Some((host, port)) = node {
            return self.on_master(host, *port, scan).await;
        }
        let _ = node;
        let mut pipe = redis::pipe();
        pipe.add_command(scan);
        let (answer,): ((u64, Vec<String>),) = self.invoke(0, &Reads(pipe)).await?;
        Ok(answer)
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
    let (now_us, kind, pttl, plain, fields, shared, queue, shared_queue, managers, fence, metas) =
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
        ("string", Some(value)) => plain_holder(&mut state, &value, lease, now_us),
        ("hash", _) => hash_holders(&mut state, &fields, &shared, now_us, lease),
        _ => {}
    }
    if state.family.is_none() && !queue.is_empty() {
        state.family = Some(LockFamily::Fair);
    }
    let mut metas = metas.iter().map(|meta| Meta::read(meta, now_us));
    for waiter in queue {
        let meta = metas.next().unwrap_or_default();
        state.waiters.push(waiter_state(waiter, Mode::Fair, meta));
    }
    for waiter in shared_queue {
        let kind = waiter.chars().next_back().unwrap_or('n');
        let mode = shared_mode(kind, state.family);
        let meta = metas.next().unwrap_or_default();
        state.waiters.push(waiter_state(waiter, mode, meta));
    }
    for pair in managers.chunks_exact(2) {
        let since: u64 = pair[1].parse().unwrap_or(now_us);
        let waited = Duration::from_micros(now_us.saturating_sub(since));
        let meta = Meta {
            age: Some(waited),
            ..Meta::default()
        };
        let waiter = waiter_state(pair[0].clone(), Mode::Exclusive, meta);
        state.waiters.push(waiter);
    }
    let tokens = state.holders.iter().filter_map(|holder| holder.token);
    state.last_token = tokens.chain(state.last_token).max();
    state
}

/// One waiter, named `waiter`, with what its wait recorded.
fn waiter_state(waiter: String, mode: Mode, meta: Meta) -> WaiterState {
    WaiterState {
        manager: manager_of(&waiter).to_owned(),
        waiter,
        mode,
        waited: meta.age,
        label: meta.label,
    }
}

/// One hold of `owner` in `mode`, with what its acquisition recorded.
fn holder_state(
    owner: &str,
    mode: Mode,
    token: Option<u64>,
    count: u32,
    meta: Meta,
) -> HolderState {
    HolderState {
        owner: owner.to_owned(),
        manager: manager_of(owner).to_owned(),
        mode,
        token,
        count,
        lease_left: None,
        held_for: meta.age,
        label: meta.label,
        request: meta.request,
    }
}

/// The holder of a plain lock (`!?<owner>|<n>`, then its meta after a tab): one hold, whose
/// token only its holder knows.
fn plain_holder(state: &mut LockState, value: &str, lease: Option<Duration>, now_us: u64) {
    let fair = value.starts_with('!');
    let (id, meta) = value.split_once('\t').unwrap_or((value, ""));
    let owner = id.trim_start_matches('!').split('|').next().unwrap_or("");
    let (family, mode) = if fair {
        (LockFamily::Fair, Mode::Fair)
    } else {
        (LockFamily::Exclusive, Mode::Exclusive)
    };
    state.family = Some(family);
    let mut holder = holder_state(owner, mode, None, 1, Meta::read(meta, now_us));
    holder.lease_left = lease;
    state.holders.push(holder);
}

/// The holders of a lock hash (`fields`: its fields and values), with the expiries of a shared
/// lock's holds (`shared`: owners and server ms) read at `now_us`.
fn hash_holders(
    state: &mut LockState,
    fields: &[String],
    shared: &[String],
    now_us: u64,
    lease: Option<Duration>,
) {
    let fields: HashMap<&str, &str> = fields
        .chunks_exact(2)
        .map(|pair| (pair[0].as_str(), pair[1].as_str()))
        .collect();
    let count = |owner: &str| fields.get(owner).and_then(|n| n.parse().ok()).unwrap_or(1);
    let token = |field: &str| fields.get(field).and_then(|t| t.parse().ok());
    let meta = |field: &str| Meta::read(fields.get(field).copied().unwrap_or(""), now_us);
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
            let mut holder = holder_state(owner, mode, token("#t"), count(owner), meta("#m"));
            holder.lease_left = lease;
            state.holders.push(holder);
        }
        return;
    }
    let now_ms = now_us / 1000;
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
        let (token, meta) = (token(&format!("#t:{owner}")), meta(&format!("#m:{owner}")));
        let mut holder = holder_state(owner, mode, token, count(owner), meta);
        holder.lease_left = Some(Duration::from_millis(expiry - now_ms));
        state.holders.push(holder);
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
