//! `LockGuard`: proof of holding a lock, its fencing token and lost-lease signal; and `Releaser`, its
//! release half, which releases the lock now or, when the guard is dropped, without waiting.

use std::sync::Arc;

use super::live::{Hold, Through};
use super::Shared;
use crate::backend::{Backend, LockParty, Released, ToRelease};
use crate::background::MustComplete;
use crate::error::{BoxError, LockError};
use crate::lease::LostSignal;

/// What a handler may know about the lock it runs under: its key, its fencing token, and whether its
/// lease is still held. Cheap to clone; the layer puts one in the request's extensions.
#[derive(Debug, Clone)]
pub struct LockInfo {
    key: Arc<str>,
    token: u64,
    lost: Arc<LostSignal>,
}

impl LockInfo {
    pub(crate) fn new(key: Arc<str>, token: u64, lost: Arc<LostSignal>) -> Self {
        LockInfo { key, token, lost }
    }

    /// The lock name, as given.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The fencing token: strictly increasing per key over every acquisition. Pass it to the storage
    /// you write to and have it reject writes carrying a token lower than one it has seen, so that a
    /// holder whose lease was lost (a long pause, a partition) cannot overwrite newer work.
    pub fn fencing_token(&self) -> u64 {
        self.token
    }

    /// True once the lease is known lost or may have run out: the watchdog found the lock gone, or
    /// the time since the last renewal known to have reached Redis (or since the acquisition) has
    /// passed the lease (a fair grant's claim lease until the watchdog has extended it), or a fixed
    /// lease ran out. It never turns false again.
    pub fn is_lost(&self) -> bool {
        self.lost.is_lost()
    }

    /// Resolves when the lease is known lost or may have run out (see [`LockInfo::is_lost`]), at
    /// that moment; pending forever while it is held.
    pub async fn lost(&self) {
        self.lost.wait().await
    }
}

/// A held lock. Release it with [`LockGuard::release`] to learn whether the lease held to the end;
/// dropping the guard releases it without waiting: the release is sent at once, and nobody waits
/// for its answer.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), tower_lock::LockError> {
/// use tower_lock::{LockManager, LockOptions};
///
/// let manager = LockManager::memory();
/// let guard = manager.acquire("account:42", &LockOptions::exclusive()).await?;
/// assert_eq!(guard.key(), "account:42");
/// assert!(!guard.is_lost());
/// guard.release().await?;
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
#[must_use = "the lock is released as soon as the guard is dropped"]
pub struct LockGuard {
    info: LockInfo,
    held: Option<Releaser>,
}

impl LockGuard {
    pub(crate) fn new(info: LockInfo, held: Releaser) -> Self {
        LockGuard {
            info,
            held: Some(held),
        }
    }

    /// The lock name, as given.
    pub fn key(&self) -> &str {
        self.info.key()
    }

    /// The fencing token (see [`LockInfo::fencing_token`]). Re-entry by the same owner yields the same
    /// token.
    pub fn fencing_token(&self) -> u64 {
        self.info.fencing_token()
    }

    /// True once the lease is known lost or may have run out (see [`LockInfo::is_lost`]).
    pub fn is_lost(&self) -> bool {
        self.info.is_lost()
    }

    /// Resolves when the lease is known lost or may have run out (see [`LockInfo::is_lost`]).
    pub async fn lost(&self) {
        self.info.lost().await
    }

    /// A cloneable view of this lock for handlers.
    pub fn info(&self) -> LockInfo {
        self.info.clone()
    }

    /// The number of this guard's hold among the manager's live holds.
    pub(crate) fn hold_number(&self) -> Option<u64> {
        self.held.as_ref().map(|held| held.number)
    }

    /// Release the lock now (one hold of it, when re-entered). Returns [`LockError::NotHeld`] when the
    /// lease had been lost before, [`LockError::Unavailable`] when the backend could not be reached
    /// (the lock then frees itself when its lease ends).
    pub async fn release(mut self) -> Result<(), LockError> {
        match self.held.take() {
            Some(held) => held.release(self.key(), self.is_lost()).await,
            None => Ok(()),
        }
    }
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        if let Some(held) = self.held.take() {
            held.release_in_background();
        }
    }
}

/// The release half of a guard: its hold's number among the manager's live holds.
#[derive(Debug)]
pub(crate) struct Releaser {
    pub(crate) shared: Arc<Shared>,
    pub(crate) number: u64,
}

impl Releaser {
    /// Release now and report how it went. If the caller stops waiting, the release still completes
    /// in the background. A hold the shutdown released already is `NotHeld`.
    pub(crate) async fn release(self, key: &str, lost: bool) -> Result<(), LockError> {
        let not_held = || LockError::NotHeld {
            key: key.to_owned(),
        };
        let hold = self.shared.live.take(self.number).ok_or_else(not_held)?;
        let released = match hold.through {
            Through::Cohort(_) => self.shared.release_in_cohort(hold).await,
            Through::ReadGroup(..) => self.shared.release_in_read_group(hold, lost).await,
            Through::Backend => {
                let token = Some(hold.token);
                let released = self.shared.release_held(hold.clone(), token, ()).await;
                if let Ok(Released::Freed) = released {
                    self.shared.live.freed(&hold);
                }
                released
            }
        };
        match released {
            Ok(Released::Freed | Released::StillHeld) => {
                tracing::debug!(key, "lock released");
                Ok(())
            }
            Ok(Released::NotHeld) => Err(not_held()),
            Err(err) => Err(LockError::unavailable(key, err)),
        }
    }

    /// Release without waiting (from `Drop`): sent at once where the backend can, else by the
    /// watchdog task.
    pub(crate) fn release_in_background(self) {
        let Some(hold) = self.shared.live.take(self.number) else {
            return; // the shutdown released it
        };
        match hold.through {
            Through::Cohort(_) => return self.shared.release_in_cohort_background(hold),
            Through::ReadGroup(..) => return self.shared.release_in_read_group_background(hold),
            Through::Backend => {}
        }
        if let Backend::Memory(memory) = &*self.shared.backend {
            // No I/O: release at once, so the next request sees the lock free.
            self.shared.stop_renewing(&hold);
            memory.release(&hold.id, &hold.owner, hold.mode, Some(hold.token));
            return;
        }
        let token = Some(hold.token);
        self.shared.release_held_later(hold, token, ());
    }
}

impl Shared {
    /// Release `held`, the backend's hold (and no other hold of its owner: it goes by its token),
    /// now (`last_used`: the last token handed out under it, when known); `after` is dropped once
    /// the release is done (a cohort's succession). If the caller stops waiting, the release
    /// still completes in the background.
    pub(crate) async fn release_held(
        &self,
        held: Hold,
        last_used: Option<u64>,
        after: impl Send + 'static,
    ) -> Result<Released, BoxError> {
        self.stop_renewing(&held);
        let backend = self.backend.clone();
        let call = Box::pin(async move {
            let released = release(&backend, &held, last_used).await;
            drop(after);
            released
        });
        MustComplete::new(call, &self.background).await
    }

    /// [`Self::release_held`] without waiting (from `Drop`): without a task where the backend can
    /// (see [`Backend::release_detached`]), else in the background. A failure is logged, and the
    /// lease runs out.
    pub(crate) fn release_held_later(
        &self,
        held: Hold,
        last_used: Option<u64>,
        after: impl Send + 'static,
    ) {
        self.stop_renewing(&held);
        let to_release = ToRelease {
            id: &held.id,
            owner: &held.owner,
            mode: held.mode,
            token: held.token,
            last_used,
        };
        let Err(after) = (self.backend).release_detached(&to_release, after, &self.background)
        else {
            return;
        };
        let backend = self.backend.clone();
        self.background.finish(async move {
            if let Err(err) = release(&backend, &held, last_used).await {
                let key = &*held.key;
                tracing::warn!(key, error = %err, "background lock release failed; the lease will run out");
            }
            drop(after);
        });
    }

    /// The watchdog stops renewing `hold` (its lease, or its fair grant's claim).
    pub(crate) fn stop_renewing(&self, hold: &Hold) {
        if hold.watched {
            self.leases.unhold(&hold.id, &hold.owner, &hold.lost);
        }
        if hold.mode.is_queued() {
            let lock = LockParty {
                id: hold.id.clone(),
                owner: hold.owner.as_arc().clone(),
            };
            self.claims.remove(&lock, &hold.lost);
        }
    }
}

/// Release `hold` in the backend, by its token (`last_used`: the last token handed out under
/// it, when known).
pub(crate) async fn release(
    backend: &Backend,
    hold: &Hold,
    last_used: Option<u64>,
) -> Result<Released, BoxError> {
    let (id, owner, mode, token) = (&hold.id, &hold.owner, hold.mode, hold.token);
    backend.release(id, owner, mode, token, last_used).await
}
