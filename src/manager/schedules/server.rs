//! The server of the schedule checks: one lock, held by one writer or by readers, each hold
//! reserving a block of tokens, as the scripts do. Each call is one step, as a script is.

use std::sync::Arc;

use tokio::sync::Notify;

use crate::backend::TOKEN_BLOCK;
use crate::ids::OwnerId;
use crate::lease::LostSignal;
use crate::sync::Mutex;

/// One lock on a model server.
#[derive(Debug, Default)]
pub(super) struct Server {
    state: Mutex<State>,
    /// Told whenever a hold goes.
    freed: Notify,
}

#[derive(Debug, Default)]
struct State {
    /// The holds: the owner, whether it writes, and the lost signal its process keeps for it.
    holds: Vec<(OwnerId, bool, Arc<LostSignal>)>,
    /// The first token of the next hold's block.
    next_token: u64,
    /// The owners waiting for the lock.
    waiting: Vec<OwnerId>,
}

/// An owner's place among the server's waiters, while its acquisition waits.
struct Waiting<'a>(&'a Server, OwnerId);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        let mut state = self.0.state.lock().unwrap();
        state.waiting.retain(|o| *o != self.1);
    }
}

impl Server {
    /// Wait until `owner` may hold the lock (`write`: alone), then hold it: the hold's token.
    pub(super) async fn acquire(
        &self,
        owner: &OwnerId,
        write: bool,
        lost: &Arc<LostSignal>,
    ) -> u64 {
        self.state.lock().unwrap().waiting.push(owner.clone());
        let _waiting = Waiting(self, owner.clone());
        loop {
            let freed = self.freed.notified();
            tokio::pin!(freed);
            freed.as_mut().enable();
            {
                let mut state = self.state.lock().unwrap();
                let free = state.holds.iter().all(|(_, w, _)| !w && !write);
                if free {
                    state.holds.push((owner.clone(), write, lost.clone()));
                    state.next_token += u64::from(TOKEN_BLOCK);
                    return state.next_token;
                }
            }
            freed.await;
        }
    }

    /// Whether anybody but `leader` waits for the lock.
    pub(super) fn queued_behind(&self, leader: &OwnerId) -> bool {
        let state = self.state.lock().unwrap();
        state.waiting.iter().any(|o| o != leader)
    }

    /// Whether `owner` holds the lock (a confirmation: one read).
    pub(super) fn holds(&self, owner: &OwnerId) -> bool {
        let state = self.state.lock().unwrap();
        state.holds.iter().any(|(o, _, _)| o == owner)
    }

    /// The hold of `owner` goes (a release, or its lease ran out): whether it was there.
    pub(super) fn release(&self, owner: &OwnerId) -> bool {
        let mut state = self.state.lock().unwrap();
        let before = state.holds.len();
        state.holds.retain(|(o, _, _)| o != owner);
        let gone = state.holds.len() < before;
        drop(state);
        self.freed.notify_waiters();
        gone
    }

    /// The owner and lost signal of a hold whose owner `is_ours` says this process may lose.
    pub(super) fn a_hold(
        &self,
        is_ours: impl Fn(&OwnerId) -> bool,
    ) -> Option<(OwnerId, Arc<LostSignal>)> {
        let state = self.state.lock().unwrap();
        let ours = state.holds.iter().find(|(o, _, _)| is_ours(o));
        ours.map(|(o, _, lost)| (o.clone(), lost.clone()))
    }

    /// Nobody holds the lock.
    pub(super) fn is_free(&self) -> bool {
        self.state.lock().unwrap().holds.is_empty()
    }
}
