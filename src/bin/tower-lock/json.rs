//! The `--json` documents of `list` and `show`: stable field names, durations in whole
//! milliseconds, `null` for what the backend did not record.
//!
//! Scripts and dashboards read these, so a field is never renamed; new ones may be added.

use serde_json::{json, Value};
use tower_lock::{HolderState, LockState, WaiterState};

use crate::describe;

/// One lock's state as a JSON object.
pub fn state(state: &LockState) -> Value {
    json!({
        "key": state.key,
        "free": state.is_free(),
        "family": state.family.map(describe::family),
        "permits": describe::permits(state.family),
        "last_token": state.last_token,
        "holders": state.holders.iter().map(holder).collect::<Vec<_>>(),
        "waiters": state.waiters.iter().enumerate().map(|(i, w)| waiter(i, w)).collect::<Vec<_>>(),
    })
}

fn holder(holder: &HolderState) -> Value {
    json!({
        "owner": holder.owner,
        "manager": holder.manager,
        "label": holder.label,
        "mode": describe::mode(holder.mode),
        "token": holder.token,
        "count": holder.count,
        "held_for_ms": holder.held_for.map(describe::millis),
        "lease_left_ms": holder.lease_left.map(describe::millis),
        "request": holder.request,
    })
}

fn waiter(index: usize, waiter: &WaiterState) -> Value {
    json!({
        "position": index + 1,
        "waiter": waiter.waiter,
        "manager": waiter.manager,
        "label": waiter.label,
        "mode": describe::mode(waiter.mode),
        "waited_ms": waiter.waited.map(describe::millis),
    })
}

/// The document of `list`: what was asked and the locks found, `limit_reached` when there may
/// be more.
pub fn list(namespace: &str, prefix: &str, limit: usize, states: &[LockState]) -> Value {
    json!({
        "namespace": namespace,
        "prefix": prefix,
        "limit": limit,
        "limit_reached": states.len() >= limit,
        "locks": states.iter().map(state).collect::<Vec<_>>(),
    })
}
