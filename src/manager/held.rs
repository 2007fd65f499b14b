//! `Held`: the part of a guard that knows how to release its lock, now or in the background.

use std::sync::Arc;

use crate::backend::{Backend, HeldLock, Released};
use crate::error::{BoxError, LockError};
use crate::manager::Shared;
use crate::options::Mode;
use crate::waiters::{LockId, WaitRegistry};

/// One hold of a lock by one owner.
#[derive(Debug)]
pub(crate) struct Held {
    pub(crate) shared: Arc<Shared>,
    pub(crate) id: LockId,
    pub(crate) owner: Arc<str>,
    /// Kept by the watchdog (else a fixed lease).
    pub(crate) watched: bool,
    pub(crate) mode: Mode,
}

impl Held {
    fn stop_renewing(&self) {
        if self.watched {
            self.shared.leases.unhold(&self.id, &self.owner);
        }
        if self.mode == Mode::Fair {
            self.shared.claims.remove(&HeldLock {
                id: self.id.clone(),
                owner: self.owner.clone(),
            });
        }
    }

    /// Release now and report how it went. If the caller stops waiting, the release still completes
    /// in the background.
    pub(crate) async fn release(self, key: &str) -> Result<(), LockError> {
        self.stop_renewing();
        let (backend, waiters) = (self.shared.backend.clone(), self.shared.waiters.clone());
        let (id, owner, mode) = (self.id.clone(), self.owner.clone(), self.mode);
        let call = Box::pin(async move { release(&backend, &waiters, &id, &owner, mode).await });
        let outcome = super::acquire::MustComplete::new(call, &self.shared).await;
        match outcome {
            Ok(Released::Freed | Released::StillHeld | Released::HandedOver { .. }) => {
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
    pub(crate) fn release_in_background(self) {
        self.stop_renewing();
        if let Backend::Memory(memory) = &*self.shared.backend {
            // No I/O: release at once, so the next request sees the lock free.
            memory.release(&self.id, &self.owner, self.mode);
            return;
        }
        let (backend, waiters) = (self.shared.backend.clone(), self.shared.waiters.clone());
        let (id, owner, mode) = (self.id.clone(), self.owner.clone(), self.mode);
        self.shared.chore(Box::pin(async move {
            if let Err(err) = release(&backend, &waiters, &id, &owner, mode).await {
                tracing::warn!(error = %err, "background lock release failed; the lease will run out");
            }
        }));
    }
}

/// Release one hold of `owner` on `id`. A fair lock that the release handed to a waiter of this
/// process (Redis says so in its answer instead of a message) is given to that waiter here, or
/// passed on when it has stopped waiting.
async fn release(
    backend: &Backend,
    waiters: &WaitRegistry,
    id: &LockId,
    owner: &str,
    mode: Mode,
) -> Result<Released, BoxError> {
    let released = backend.release(id, owner, mode).await?;
    if let Released::HandedOver { owner: next, token } = &released {
        if !waiters.grant(id, next, *token) {
            if let Err(err) = backend.leave_queue(id, next, Some(*token)).await {
                // The grant's claim lease runs out, and the next heartbeat finds the lock free.
                tracing::debug!(error = %err, "could not pass on a grant nobody here took");
            }
        }
    }
    Ok(released)
}
