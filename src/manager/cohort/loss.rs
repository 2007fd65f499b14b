//! A cohort's hold whose lease is lost while requests wait behind it.
//!
//! The holder may keep its guard after its `lost()` fired (a slow handler; the layer's default
//! `OnLeaseLost` does so), and while it does, it releases nothing. The requests waiting behind it
//! must not sleep on: the lock may be free in the server (a restart forgot it, a pause outlasted
//! the lease, somebody deleted it). So a task watches the lease of every hold a cohort keeps; once
//! it is lost, the cohort stops handing that hold on, gives it back to the server (by its token,
//! should the server hold it still), and the first request waiting leads anew at once: it takes
//! the lock in the server, the others waiting behind it as before.

use std::sync::{Arc, Weak};

use tokio::sync::oneshot;

use super::Cohorts;
use crate::manager::live::Hold;
use crate::manager::Shared;

impl Cohorts {
    /// The lease of `hold`, a cohort's, is lost. If the cohort keeps it still and requests wait,
    /// the hold leaves the cohort (returned, to give back) and the first of them leads anew. With
    /// nobody waiting nothing changes: the holder's release gives the hold back, and a request
    /// that comes first leads (see `Cohorts::enter`).
    pub(crate) fn lost(self: &Arc<Self>, hold: &Hold) -> Option<Hold> {
        let mut table = self.table();
        let cohort = table.cohorts.get_mut(&hold.id)?;
        let ours =
            (cohort.held.as_ref()).is_some_and(|h| h.owner == hold.owner && h.token == hold.token);
        if !ours {
            return None;
        }
        cohort.waiting.retain(|w| !w.turn.is_closed());
        if cohort.waiting.is_empty() {
            return None;
        }
        let held = cohort.held.take();
        cohort.watch = None;
        cohort.holder = None;
        cohort.leader = None;
        cohort.handoffs = 0;
        drop(table);
        self.succeed(&hold.id);
        held
    }
}

impl Shared {
    /// Watch the lease of `hold`, a cohort's, until it leaves the cohort (`left` resolves): once
    /// it is lost, the requests waiting behind it go to the server ([`Cohorts::lost`]).
    pub(crate) fn watch_cohort_hold(self: &Arc<Self>, hold: Hold, left: oneshot::Receiver<()>) {
        // weak: a cohort that outlives its manager keeps nothing alive
        let shared: Weak<Shared> = Arc::downgrade(self);
        tokio::spawn(async move {
            tokio::select! {
                () = hold.lost.wait() => {}
                _ = left => return,
            }
            let Some(shared) = shared.upgrade() else {
                return;
            };
            if let Some(lost) = shared.cohorts.lost(&hold) {
                tracing::debug!(
                    key = &*hold.key,
                    "cohort's lease lost: its waiters lead anew"
                );
                shared.give_back_lost(lost);
            }
        });
    }
}
