//! `Held`: the part of a guard that knows how to release its lock, now or in the background.

use std::sync::Arc;

use crate::backend::{Backend, HeldLock, Released};
use crate::error::LockError;
use crate::guard::LostSignal;
use crate::manager::Shared;
use crate::options::Mode;
use crate::waiters::LockId;

/// One hold of a lock by one owner.
#[derive(Debug)]
pub(crate) struct Held {
    pub(crate) shared: Arc<Shared>,
    pub(crate) id: LockId,
    pub(crate) owner: Arc<str>,
    /// The hold's fencing token: the release of a lost hold reaches only the holds made under it
    /// (not a later acquisition of the same owner, after this one's lease was lost).
    pub(crate) token: u64,
    /// Kept by the watchdog (else a fixed lease).
    pub(crate) watched: bool,
    /// The guard's lost signal: which watchdog lease it counts on.
    pub(crate) lost: Arc<LostSignal>,
    pub(crate) mode: Mode,
}

impl Held {
    fn stop_renewing(&self) {
        if self.watched {
            self.shared.leases.unhold(&self.id, &self.owner, &self.lost);
        }
        if self.mode == Mode::Fair {
            let lock = HeldLock {
                id: self.id.clone(),
                owner: self.owner.clone(),
            };
            self.shared.claims.remove(&lock, &self.lost);
        }
    }

    /// Release now and report how it went. If the caller stops waiting, the release still completes
    /// in the background.
    pub(crate) async fn release(self, key: &str, lost: bool) -> Result<(), LockError> {
        self.stop_renewing();
        let backend = self.shared.backend.clone();
        let (id, owner, mode, token) = (self.id.clone(), self.owner.clone(), self.mode, self.token);
        let call = Box::pin(async move { backend.release(&id, &owner, mode, token, lost).await });
        let outcome = super::acquire::MustComplete::new(call, &self.shared).await;
        match outcome {
            Ok(Released::Freed | Released::StillHeld) => {
                tracing::debug!(key, "lock released");
                Ok(())
            }
            Ok(Released::NotHeld) => Err(LockError::NotHeld {
                key: key.to_owned(),
            }),
            Err(err) => Err(LockError::unavailable(key, err)),
        }
    }

    /// Release without waiting (from `Drop`): the watchdog task sends it.
    pub(crate) fn release_in_background(self, lost: bool) {
        self.stop_renewing();
        if let Backend::Memory(memory) = &*self.shared.backend {
            // No I/O: release at once, so the next request sees the lock free.
            memory.release(&self.id, &self.owner, self.mode, lost.then_some(self.token));
            return;
        }
        let backend = self.shared.backend.clone();
        let (id, owner, mode, token) = (self.id.clone(), self.owner.clone(), self.mode, self.token);
        self.shared.chore(Box::pin(async move {
            if let Err(err) = backend.release(&id, &owner, mode, token, lost).await {
                tracing::warn!(error = %err, "background lock release failed; the lease will run out");
            }
        }));
    }
}
