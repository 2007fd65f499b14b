//! The leases the watchdog keeps, by (lock, owner): how many guards share each, its lost signal
//! and deadline, and the token of its holds.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::backend::LockParty;
use crate::ids::{IdMap, OwnerId};
use crate::lease::LostSignal;
use crate::saturating::later;
use crate::telemetry;
use crate::waiters::LockId;

#[derive(Debug)]
struct Lease {
    /// Guards of this owner on this lock (re-entry shares one lease).
    guards: usize,
    /// Fires when the lease is lost; holds how long it is known valid (each renewal, counted from
    /// its start, moves that later).
    lost: Arc<LostSignal>,
    /// The fencing token of the holds: a guard of an earlier hold of the same owner (lost, then
    /// the lock taken again) is not one of them.
    token: u64,
}

/// Every watchdog-kept lease of one manager, by (lock, owner).
#[derive(Debug, Default)]
pub(crate) struct Leases {
    table: Mutex<IdMap<(LockId, OwnerId), Lease>>,
}

impl Leases {
    fn table(&self) -> MutexGuard<'_, IdMap<(LockId, OwnerId), Lease>> {
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Start (or, on re-entry, join) keeping the lease of `owner` on `id` under `token`, known
    /// valid until `valid_until`.
    pub(crate) fn hold(
        &self,
        key: &Arc<str>,
        id: &LockId,
        owner: &OwnerId,
        token: u64,
        valid_until: Instant,
    ) -> Arc<LostSignal> {
        let mut table = self.table();
        let fresh = || Lease {
            guards: 0,
            lost: Arc::new(LostSignal::new(key.clone(), Some(valid_until))),
            token,
        };
        let lease = table
            .entry((id.clone(), owner.clone()))
            .or_insert_with(fresh);
        if lease.token != token {
            // The earlier holds of this owner are gone (the lock was taken anew): their guards
            // are lost, and this hold starts its own lease.
            lease.lost.fire();
            *lease = fresh();
        } else if !lease.lost.extend(valid_until) {
            // The lease had run out here before a renewal noticed, yet Redis took this re-entry:
            // the earlier guards stay lost, and are no longer counted; the holds go on under a
            // new signal.
            *lease = fresh();
        }
        lease.guards += 1;
        lease.lost.clone()
    }

    /// One guard of `owner` on `id` is released: stop renewing once none is left. A guard counts
    /// only on the lease it joined (`lost`: the signal it got): a guard whose lease was lost,
    /// released after the owner re-entered under the same token, must not take the new lease's
    /// count (its renewal would stop under the new guard).
    pub(crate) fn unhold(&self, id: &LockId, owner: &OwnerId, lost: &Arc<LostSignal>) {
        let mut table = self.table();
        let key = (id.clone(), owner.clone());
        if let Some(lease) = table.get_mut(&key).filter(|l| Arc::ptr_eq(&l.lost, lost)) {
            lease.guards -= 1;
            if lease.guards == 0 {
                table.remove(&key);
            }
        }
    }

    /// Every lease, with the token of its holds.
    pub(super) fn snapshot(&self) -> Vec<(LockParty, u64)> {
        self.table()
            .iter()
            .map(|((id, owner), lease)| {
                let lock = LockParty {
                    id: id.clone(),
                    owner: owner.as_arc().clone(),
                };
                (lock, lease.token)
            })
            .collect()
    }

    /// Number of leases kept (for tests and metrics).
    pub(crate) fn len(&self) -> usize {
        self.table().len()
    }

    /// The outcome of renewing the lease of `lock` whose holds had `token` when the round began.
    /// A renewal that found the hold proves it held after `started` (see `LostSignal::prove`).
    pub(crate) fn record(
        &self,
        lock: &LockParty,
        token: u64,
        outcome: Option<bool>,
        started: Instant,
        lease: Duration,
    ) {
        let mut table = self.table();
        let key = (lock.id.clone(), OwnerId::new(lock.owner.clone()));
        // released meanwhile, or the owner took the lock again since: not this lease any more
        let Some(entry) = table.get_mut(&key).filter(|entry| entry.token == token) else {
            return;
        };
        let lost = judge(&entry.lost, outcome, later(started, lease));
        if !lost && outcome == Some(true) {
            entry.lost.prove(started);
        }
        if lost {
            tracing::debug!(key = entry.lost.key(), lock = %lock.id, "lease lost");
            entry.lost.fire();
            table.remove(&key);
        }
    }
}

/// Whether a renewal's `outcome` (renewed, gone, or no answer) loses the lease of `lost`, which
/// the renewal would make valid until `until`. Logged (naming the lock) and counted.
fn judge(lost: &LostSignal, outcome: Option<bool>, until: Instant) -> bool {
    let key = lost.key();
    let cause = match outcome {
        Some(true) if lost.extend(until) => {
            telemetry::renewed("renewed", 1);
            return false;
        }
        Some(true) => {
            tracing::warn!(
                key,
                "lock lease lost: renewed only after it could have run out"
            );
            "late"
        }
        Some(false) => {
            tracing::warn!(key, "lock lease lost: the lock was gone at renewal");
            "gone"
        }
        None => {
            telemetry::renewed("failed", 1);
            if !lost.is_lost() {
                return false;
            }
            tracing::warn!(key, "lock lease lost: not renewed for a whole lease period");
            telemetry::lease_lost("expired");
            return true;
        }
    };
    telemetry::renewed("lost", 1);
    telemetry::lease_lost(cause);
    true
}
