//! `LockGuard`: proof of holding a lock, its fencing token, the lost-lease signal, and release (explicit
//! or, on drop, in the background).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use tokio::sync::Notify;

use crate::error::LockError;
use crate::manager::Held;

/// Fires once, when a lease is known to be lost, or may have run out: a lease is valid until a
/// deadline that each renewal moves later, and once that deadline passes unrenewed the lease counts
/// as lost (for good: a renewal that lands later does not bring it back), whether or not a renewal
/// round has noticed yet.
#[derive(Debug)]
pub(crate) struct LostSignal {
    lost: AtomicBool,
    notify: Notify,
    /// The lease is known valid until here (`None`: it does not run out by time).
    valid_until: Mutex<Option<Instant>>,
}

impl LostSignal {
    pub(crate) fn new(valid_until: Option<Instant>) -> Self {
        LostSignal {
            lost: AtomicBool::new(false),
            notify: Notify::new(),
            valid_until: Mutex::new(valid_until),
        }
    }

    pub(crate) fn fire(&self) {
        self.lost.store(true, Ordering::SeqCst);
        self.notify.notify_waiters();
    }

    fn valid_until(&self) -> MutexGuard<'_, Option<Instant>> {
        self.valid_until.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A renewal made the lease valid until `until`. False when it came too late: the lease had
    /// already run out (or was lost), and stays lost.
    pub(crate) fn extend(&self, until: Instant) -> bool {
        let mut valid_until = self.valid_until();
        if self.is_lost_at(*valid_until, Instant::now()) {
            drop(valid_until);
            self.fire();
            return false;
        }
        if let Some(deadline) = valid_until.as_mut() {
            *deadline = (*deadline).max(until);
        }
        true
    }

    fn is_lost_at(&self, valid_until: Option<Instant>, now: Instant) -> bool {
        self.lost.load(Ordering::SeqCst) || valid_until.is_some_and(|d| now >= d)
    }

    pub(crate) fn is_lost(&self) -> bool {
        let lost = self.is_lost_at(*self.valid_until(), Instant::now());
        if lost {
            // latch it: a deadline that passed stays passed
            self.lost.store(true, Ordering::SeqCst);
        }
        lost
    }

    async fn wait(&self) {
        loop {
            let notified = self.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.is_lost() {
                return;
            }
            let valid_until = *self.valid_until();
            match valid_until {
                // at the deadline, look again: a renewal may have moved it
                Some(deadline) => {
                    tokio::select! {
                        _ = notified => {}
                        _ = tokio::time::sleep_until(deadline.into()) => {}
                    }
                }
                None => notified.await,
            }
        }
    }
}

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
/// dropping the guard releases it in the background.
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
    held: Option<Held>,
}

impl LockGuard {
    pub(crate) fn new(info: LockInfo, held: Held) -> Self {
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
            held.release_in_background(self.is_lost());
        }
    }
}
