//! `inspect` and `list` in memory: a lock's holders and queues, read under the table's lock, so
//! that one answer shows one instant as on Redis.

use std::time::{Duration, Instant};

use super::{MemoryBackend, Table};
use crate::options::Mode;
use crate::state::{manager_of, shared_mode, HolderState, LockFamily, LockState, WaiterState};
use crate::waiters::LockId;

impl MemoryBackend {
    /// The state of lock `id` (named `key` in the answer). The requests of this process waiting
    /// in exclusive mode are not recorded here (they wait on the process's registry), as a
    /// waiting manager is on Redis: only fair and shared queues show.
    pub(crate) fn inspect(&self, id: &LockId, key: &str) -> LockState {
        let mut table = self.table();
        inspect_in(&mut table, id, key, Instant::now(), &self.label)
    }

    /// The held or waited-for locks whose names start with `prefix`, `limit` at most, by name.
    pub(crate) fn list(&self, prefix: &str, limit: usize) -> Vec<LockState> {
        let now = Instant::now();
        let mut table = self.table();
        let mut names: Vec<LockId> = (table.locks.keys())
            .chain(table.queues.keys())
            .chain(table.shared.keys())
            .filter(|id| id.starts_with(prefix))
            .cloned()
            .collect();
        names.sort_by_key(|id| id.to_string());
        names.dedup_by(|a, b| **a == **b);
        let states = names
            .iter()
            .map(|id| inspect_in(&mut table, id, id, now, &self.label));
        states
            .filter(|state| !state.is_idle())
            .take(limit)
            .collect()
    }
}

/// The state of lock `id` in `table` at `now`.
fn inspect_in(table: &mut Table, id: &LockId, key: &str, now: Instant, label: &str) -> LockState {
    let mut state = LockState {
        key: key.to_owned(),
        family: None,
        holders: Vec::new(),
        waiters: Vec::new(),
        last_token: None,
    };
    if let Some(held) = table.holder(id, now) {
        state.family = Some(if held.mode == Mode::Fair {
            LockFamily::Fair
        } else {
            LockFamily::Exclusive
        });
        state.holders.push(HolderState {
            owner: held.owner.to_string(),
            manager: manager_of(&held.owner).to_owned(),
            mode: held.mode,
            token: Some(held.token),
            count: held.count,
            lease_left: Some(held.expires.saturating_duration_since(now)),
            held_for: Some(now.saturating_duration_since(held.meta.began)),
            label: Some(label.to_owned()),
            request: held.meta.request.as_deref().map(str::to_owned),
        });
    }
    if let Some(queue) = table.queues.get(id) {
        if !queue.is_empty() {
            state.family.get_or_insert(LockFamily::Fair);
        }
        for waiter in queue {
            state.waiters.push(waiter_state(waiter, Mode::Fair, label));
        }
    }
    if let Some(lock) = table.shared.get(id) {
        let family = match lock.family {
            Mode::Semaphore(n) => LockFamily::Semaphore(n),
            _ => LockFamily::ReadWrite,
        };
        state.family = Some(family);
        let mut holds: Vec<_> = lock.holds.iter().filter(|(_, h)| h.expires > now).collect();
        holds.sort_by_key(|(_, hold)| hold.token);
        for (owner, hold) in holds {
            let mode = match family {
                LockFamily::Semaphore(n) => Mode::Semaphore(n),
                _ if hold.write => Mode::Write,
                _ => Mode::Read,
            };
            state.holders.push(HolderState {
                owner: owner.to_string(),
                manager: manager_of(owner).to_owned(),
                mode,
                token: Some(hold.token),
                count: hold.count,
                lease_left: Some(hold.expires.saturating_duration_since(now)),
                held_for: Some(now.saturating_duration_since(hold.meta.began)),
                label: Some(label.to_owned()),
                request: hold.meta.request.as_deref().map(str::to_owned),
            });
        }
        for waiter in &lock.queue {
            let kind = waiter.chars().next_back().unwrap_or('n');
            state
                .waiters
                .push(waiter_state(waiter, shared_mode(kind, Some(family)), label));
        }
    }
    state.last_token = state.holders.iter().filter_map(|h| h.token).max();
    state
}

/// One queued waiter, named `waiter`; memory keeps no time of arrival.
fn waiter_state(waiter: &str, mode: Mode, label: &str) -> WaiterState {
    WaiterState {
        waiter: waiter.to_owned(),
        manager: manager_of(waiter).to_owned(),
        mode,
        waited: None::<Duration>,
        label: Some(label.to_owned()),
    }
}
