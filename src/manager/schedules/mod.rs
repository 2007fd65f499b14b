//! Schedule checks of the cohort hand-off and the read groups: the real `Cohorts` and
//! `ReadGroups`, on shuttle's locks, driven by requests against a model server under many
//! schedules (see `crate::schedules`).
//!
//! What they cover: every decision the cohort table and the read groups make under their lock,
//! the gaps between those critical sections (a seat dropped, a lost lease's watcher, a succession
//! run after the server's release), the turns and memberships sent over channels, the
//! confirmation asked for an unproven hold, a queued request or a leader that gives up (a turn
//! that reaches it as it does), a fair request asking the server whether others wait, and a
//! connection that drops and comes back (`wake_all`) at a step of the scheduler's choosing. The
//! requests mirror `cohort_requests.rs` and `read_group_requests.rs` step by step; the server
//! answers as the scripts would, one call at a time. Asserted: no double holder (two holders at
//! once unless one's `lost()` fired), no hand-off or join of a hold whose loss fired before,
//! every token given once, no cohort hand-off of a hold taken before a connection dropped, and
//! every request served (a waiter left behind deadlocks, which shuttle reports), the lock free and
//! nobody waiting at the end.
//!
//! What they leave out: a server that forgets holds when a connection drops, the shutdown, a
//! leader's attempt that fails (`disband`), re-entries, requests that do not wait, reads that give
//! up, and the real Redis calls (the model server stands for them; the protocol's own model is
//! `tests/model`). A turn that its request no longer takes is taken and released by the test,
//! where the crate releases it in the background. Time is real: the proof of a hold is taken
//! fresh by a confirmation, so a replayed schedule takes the same branches unless a step outlasts
//! `PROOF`. The dropped connection is only counted: the model server keeps its holds, since a
//! server that restarts and grants the lock to another process within `PROOF` of answering this
//! one is what the hand-off's proof assumes away (`cohort/hand_off.rs`).

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;

use futures_util::future::{select, Either};
use shuttle::future::yield_now;

use crate::ids::OwnerId;
use crate::lease::LostSignal;
use crate::sync::{AtomicU64, Mutex};

mod cohort;
mod read_group;
mod server;

/// A request holding the lock, as the checks see it.
#[derive(Debug)]
struct Holding {
    who: usize,
    write: bool,
    token: u64,
    lost: Arc<LostSignal>,
}

/// What the requests of a scenario report, and the invariants asserted as they do.
#[derive(Debug, Default)]
struct Checks {
    holders: Mutex<Vec<Holding>>,
    tokens: Mutex<Vec<u64>>,
    /// Counts the steps the checks see, to order a loss before a hand-off.
    clock: AtomicU64,
    /// The owners whose lease was lost, with the step after the loss fired.
    losses: Mutex<Vec<(OwnerId, u64)>>,
    /// Each leader, with the step after it read the count of connection troubles.
    leaders: Mutex<Vec<(OwnerId, u64)>>,
    /// The steps before and after each connection drop.
    drops: Mutex<Vec<(u64, u64)>>,
}

impl Checks {
    /// Request `who` holds the lock under `token`; nobody else may, unless one's `lost()` fired.
    fn hold(&self, who: usize, write: bool, token: u64, lost: &Arc<LostSignal>) {
        let mut tokens = self.tokens.lock().unwrap();
        assert!(!tokens.contains(&token), "token {token} given twice");
        tokens.push(token);
        let mut holders = self.holders.lock().unwrap();
        for other in holders.iter().filter(|h| h.write || write) {
            let told = other.lost.is_lost() || lost.is_lost();
            assert!(
                told,
                "double holder: request {who} (token {token}) and request {} (token {}), \
                 neither lost",
                other.who, other.token
            );
        }
        let lost = lost.clone();
        holders.push(Holding {
            who,
            write,
            token,
            lost,
        });
    }

    /// Request `who` no longer holds the lock.
    fn unhold(&self, who: usize) {
        self.holders.lock().unwrap().retain(|h| h.who != who);
    }

    /// The next step.
    fn tick(&self) -> u64 {
        self.clock.fetch_add(1, std::sync::atomic::Ordering::SeqCst)
    }

    /// The lease of `owner`'s hold is lost: its signal fires.
    fn lose(&self, owner: &OwnerId, lost: &LostSignal) {
        lost.fire();
        let at = self.tick();
        self.losses.lock().unwrap().push((owner.clone(), at));
    }

    /// Whether the lease of `owner` was lost before step `at`.
    fn lost_before(&self, owner: &OwnerId, at: u64) -> bool {
        let losses = self.losses.lock().unwrap();
        losses.iter().any(|(o, when)| o == owner && *when < at)
    }

    /// `leader` read the count of connection troubles (`wake_alls`) as it began.
    fn began(&self, leader: &OwnerId) {
        let at = self.tick();
        self.leaders.lock().unwrap().push((leader.clone(), at));
    }

    /// A connection drops: `drop` counts it, between two steps.
    fn connection_dropped(&self, drop: impl FnOnce()) {
        let before = self.tick();
        drop();
        let after = self.tick();
        self.drops.lock().unwrap().push((before, after));
    }

    /// Whether a connection dropped, whole, after `leader` began and before step `at`.
    fn dropped_since(&self, leader: &OwnerId, at: u64) -> bool {
        let leaders = self.leaders.lock().unwrap();
        let Some(&(_, began)) = leaders.iter().find(|(o, _)| o == leader) else {
            return false;
        };
        let drops = self.drops.lock().unwrap();
        drops
            .iter()
            .any(|&(before, after)| began < before && after < at)
    }

    /// Nobody holds the lock.
    fn nobody_holds(&self) -> bool {
        self.holders.lock().unwrap().is_empty()
    }
}

/// What `future` gives, unless `patience` (when some) runs out first: that many steps of the
/// waiting task, a timer that fires at steps the scheduler chooses.
async fn within<F: Future>(patience: Option<usize>, future: F) -> Option<F::Output> {
    let Some(steps) = patience else {
        return Some(future.await);
    };
    let timer = async move {
        for _ in 0..steps {
            yield_now().await;
        }
    };
    match select(pin!(future), pin!(timer)).await {
        Either::Left((output, _)) => Some(output),
        Either::Right(_) => None,
    }
}
