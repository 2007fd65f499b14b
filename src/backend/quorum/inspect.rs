//! `inspect`, `list` and `force_release` on a quorum: each master is read (or forced) as one
//! server is, and a hold shows only where a majority of masters keeps it, as a hold exists only
//! where a majority granted it.

use std::collections::BTreeMap;
use std::time::Duration;

use futures_util::future::join_all;

use super::{bounded, majority, QuorumBackend};
use crate::error::BoxError;
use crate::state::{HolderState, LockFamily, LockState, WaiterState};
use crate::waiters::LockId;

impl QuorumBackend {
    /// The state of `id` (named `key`): each master's, merged. Fails when fewer than a majority
    /// of masters answer.
    pub(crate) async fn inspect(&self, id: &LockId, key: &str) -> Result<LockState, BoxError> {
        let reads = self
            .nodes
            .iter()
            .map(|node| bounded(self.node_timeout, &node.up, node.redis.inspect(id, key)));
        let states = self.majority_of(join_all(reads).await)?;
        Ok(merge(key, states, majority(self.nodes.len())))
    }

    /// The held or waited-for locks whose names start with `prefix`, `limit` at most: the names
    /// every master that answers finds, each read as [`inspect`](Self::inspect) reads it.
    pub(crate) async fn list(
        &self,
        prefix: &str,
        limit: usize,
    ) -> Result<Vec<LockState>, BoxError> {
        let scans = self.nodes.iter().map(|node| {
            let scan = node.redis.scan_locks(prefix, limit);
            bounded(self.node_timeout * 4, &node.up, scan)
        });
        let found = self.majority_of(join_all(scans).await)?;
        let names: BTreeMap<String, LockId> = (found.into_iter().flatten())
            .map(|(id, name)| (name, id))
            .collect();
        let mut states = Vec::new();
        for (name, id) in names {
            let state = self.inspect(&id, &name).await?;
            if !state.is_idle() {
                states.push(state);
            }
            if states.len() >= limit {
                break;
            }
        }
        Ok(states)
    }

    /// End every hold of `id` on every master that answers, passing the lock on there as a
    /// release does; true when a hold was ended on any of them.
    pub(crate) async fn force_release(&self, id: &LockId) -> Result<bool, BoxError> {
        let forced = self
            .nodes
            .iter()
            .map(|node| bounded(self.node_timeout, &node.up, node.redis.force_release(id)));
        let ended = self.majority_of(join_all(forced).await)?;
        Ok(ended.into_iter().any(|ended| ended))
    }

    /// The answers of the masters that answered, when a majority did.
    fn majority_of<T>(&self, answers: Vec<Result<T, BoxError>>) -> Result<Vec<T>, BoxError> {
        let n = answers.len();
        let mut errors = Vec::new();
        let answered: Vec<T> = answers
            .into_iter()
            .filter_map(|answer| answer.map_err(|err| errors.push(err.to_string())).ok())
            .collect();
        if answered.len() < majority(n) {
            let why = errors.join("; ");
            return Err(format!("{} of {n} masters answered ({why})", answered.len()).into());
        }
        Ok(answered)
    }
}

/// One state of `key` from the states of the masters that answered: the holds a majority
/// (`quorum`) of masters keep, each with the lease and age that majority gives it; every waiter
/// any master records, longest waiting first.
fn merge(key: &str, states: Vec<LockState>, quorum: usize) -> LockState {
    let mut holds: BTreeMap<String, Vec<HolderState>> = BTreeMap::new();
    let mut waiters: BTreeMap<String, WaiterState> = BTreeMap::new();
    let mut last_token = None;
    for state in states {
        last_token = last_token.max(state.last_token);
        for holder in state.holders {
            holds.entry(holder.owner.clone()).or_default().push(holder);
        }
        for waiter in state.waiters {
            let kept = waiters
                .entry(waiter.waiter.clone())
                .or_insert(waiter.clone());
            kept.waited = kept.waited.max(waiter.waited);
        }
    }
    let holders: Vec<HolderState> = holds
        .into_values()
        .filter(|parts| parts.len() >= quorum)
        .map(|parts| majority_hold(parts, quorum))
        .collect();
    let mut waiters: Vec<WaiterState> = waiters.into_values().collect();
    waiters.sort_by_key(|waiter| std::cmp::Reverse(waiter.waited));
    let used = !holders.is_empty() || !waiters.is_empty();
    LockState {
        key: key.to_owned(),
        family: used.then_some(LockFamily::Exclusive),
        holders,
        waiters,
        last_token,
    }
}

/// One hold from its parts on at least `quorum` masters: it lasts while a majority keeps it
/// (the `quorum`-th longest lease) and began once a majority granted it (the `quorum`-th oldest
/// part); its token is the highest a master issued for it, at least the one its guard has.
fn majority_hold(mut parts: Vec<HolderState>, quorum: usize) -> HolderState {
    let nth_longest = |mut values: Vec<Option<Duration>>| {
        values.sort_by(|a, b| b.cmp(a));
        values.get(quorum - 1).copied().flatten()
    };
    let leases = parts.iter().map(|part| part.lease_left).collect();
    let ages = parts.iter().map(|part| part.held_for).collect();
    let token = parts.iter().filter_map(|part| part.token).max();
    let count = parts.iter().map(|part| part.count).max().unwrap_or(1);
    let mut hold = parts.swap_remove(0);
    hold.lease_left = nth_longest(leases);
    hold.held_for = nth_longest(ages);
    hold.token = token;
    hold.count = count;
    hold
}
