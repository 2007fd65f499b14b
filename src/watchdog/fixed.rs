//! Holds with a fixed lease, when they may be taken over as dead: the watchdog never extends
//! them, but each renewal round touches them, so that their takeover marks go and their takeover
//! deadline moves on as a kept lease's does (DESIGN.md, "Dead holders"). Without it, an inbox
//! reconnection would lose every such hold a grace later.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::backend::{Backend, LockParty};
use crate::lease::LostSignal;

/// Lists a manager's holds with a fixed lease, and their lost signals.
pub(crate) struct FixedHolds(
    pub(crate) Box<dyn Fn() -> Vec<(LockParty, Arc<LostSignal>)> + Send + Sync>,
);

impl std::fmt::Debug for FixedHolds {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FixedHolds")
    }
}

/// Renew each of `fixed` to a lease of zero, which lengthens nothing (`PEXPIRE ... GT`) but
/// deletes its takeover mark; a hold found moves its takeover deadline on. A hold not found, or
/// no answer, changes nothing: its fixed lease still ends it.
pub(super) async fn touch_fixed(backend: Arc<Backend>, fixed: Vec<(LockParty, Arc<LostSignal>)>) {
    let started = Instant::now();
    for batch in fixed.chunks(backend.renew_batch_size()) {
        let parties: Vec<LockParty> = batch.iter().map(|(party, _)| party.clone()).collect();
        let Ok(found) = backend.renew(&parties, Duration::ZERO).await else {
            continue;
        };
        for ((_, lost), found) in batch.iter().zip(found) {
            if found {
                lost.renewed(started);
            }
        }
    }
}
