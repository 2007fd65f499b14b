//! The lost-lease signal: a lease's deadline, moved on by each renewal, and the one-way switch that
//! fires when the lease is known lost or the deadline passed. It imports nothing of the crate: the
//! watchdog moves the deadline, and guards read it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use tokio::sync::Notify;

/// Fires once, when a lease is known to be lost, or may have run out: a lease is valid until a
/// deadline that each renewal moves later, and once that deadline passes unrenewed the lease counts
/// as lost (for good: a renewal that lands later does not bring it back), whether or not a renewal
/// round has noticed yet.
#[derive(Debug)]
pub(crate) struct LostSignal {
    /// The lock name, as given: every report of the loss names it.
    key: Arc<str>,
    lost: AtomicBool,
    notify: Notify,
    /// The lease is known valid until here (`None`: it does not run out by time).
    valid_until: Mutex<Option<Instant>>,
    /// The latest moment after which the server is known to have held the lease: the start of
    /// the last call it answered with the hold (the acquisition, or a renewal that found it).
    proven: Mutex<Option<Instant>>,
}

impl LostSignal {
    pub(crate) fn new(key: Arc<str>, valid_until: Option<Instant>) -> Self {
        LostSignal {
            key,
            lost: AtomicBool::new(false),
            notify: Notify::new(),
            valid_until: Mutex::new(valid_until),
            proven: Mutex::new(None),
        }
    }

    /// The server answered a call begun at `at` with the hold: it held the lease after `at`.
    pub(crate) fn prove(&self, at: Instant) {
        let mut proven = self.proven.lock().unwrap_or_else(|p| p.into_inner());
        *proven = Some(proven.map_or(at, |before| before.max(at)));
    }

    /// The latest moment after which the server is known to have held the lease (see
    /// [`LostSignal::prove`]); `None` before any proof.
    pub(crate) fn proven(&self) -> Option<Instant> {
        *self.proven.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The lock name, as given.
    pub(crate) fn key(&self) -> &str {
        &self.key
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

    /// Resolves once the lease is lost (see [`LostSignal::is_lost`]).
    pub(crate) async fn wait(&self) {
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
