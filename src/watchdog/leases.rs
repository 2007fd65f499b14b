//! The leases the watchdog keeps, by (lock, owner): how many guards share each, its lost signal,
//! deadline and ceiling, and the token of its holds.

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
    /// When the first of the holds began: every ceiling a hold asks for counts from here.
    began: Instant,
}

/// How a hold the watchdog keeps begins: when, how long the server is known to keep it, and
/// the ceiling it asks for.
#[derive(Debug, Clone, Copy)]
pub(crate) struct HoldStart {
    /// The hold's fencing token.
    pub(crate) token: u64,
    /// The server made the hold after this moment (the start of the call that took it).
    pub(crate) since: Instant,
    /// The lease is known valid until here.
    pub(crate) valid_until: Instant,
    /// The hold's ceiling, counted from the start of the owner's first hold.
    pub(crate) max_hold: Option<Duration>,
}

/// One lease for a renewal round: the lock, the token of its holds, and the lease to ask for
/// (the manager's, cut to end at the hold's ceiling).
#[derive(Debug, Clone)]
pub(super) struct Renewal {
    pub(super) lock: LockParty,
    pub(super) token: u64,
    pub(super) lease: Duration,
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

    /// Start (or, on re-entry, join) keeping the lease of `owner` on `id` as `start` says. A
    /// re-entry's ceiling counts from the first hold, and lowers the lease's if it is earlier.
    pub(crate) fn hold(
        &self,
        key: &Arc<str>,
        id: &LockId,
        owner: &OwnerId,
        start: HoldStart,
    ) -> Arc<LostSignal> {
        let mut table = self.table();
        let HoldStart {
            token, valid_until, ..
        } = start;
        let ceiling = |began| start.max_hold.map(|max_hold| later(began, max_hold));
        let fresh = || {
            let lost = LostSignal::new(key.clone(), Some(valid_until));
            Lease {
                guards: 0,
                lost: Arc::new(lost.capped(ceiling(start.since))),
                token,
                began: start.since,
            }
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
        } else if let Some(ceiling) = ceiling(lease.began) {
            lease.lost.cap(ceiling);
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

    /// Every lease to renew in a round that starts now, each asking for `lease` or less: a
    /// lease ends at its hold's ceiling. A lease whose ceiling has come is renewed no more: it is
    /// lost, and no longer kept.
    pub(super) fn snapshot(&self, lease: Duration) -> Vec<Renewal> {
        let now = Instant::now();
        let mut table = self.table();
        table.retain(|_, kept| !reached_ceiling(&kept.lost, now));
        let renewals = table.iter().map(|((id, owner), kept)| {
            let lock = LockParty {
                id: id.clone(),
                owner: owner.as_arc().clone(),
            };
            let left = kept.lost.ceiling().map(|c| c.duration_since(now));
            let lease = left.map_or(lease, |left| left.min(lease));
            Renewal {
                lock,
                token: kept.token,
                lease,
            }
        });
        renewals.collect()
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
        if reached_ceiling(&entry.lost, Instant::now()) {
            table.remove(&key);
            return;
        }
        let lost = judge(&entry.lost, outcome, later(started, lease));
        if !lost && outcome == Some(true) {
            entry.lost.prove(started);
            entry.lost.renewed(started);
        }
        if lost {
            tracing::debug!(key = entry.lost.key(), lock = %lock.id, "lease lost");
            entry.lost.fire();
            table.remove(&key);
        }
    }
}

/// Whether the hold of `lost` has come to its ceiling at `now`: then it is lost (logged, named,
/// and counted once, by whoever finds it first, as it leaves the table).
fn reached_ceiling(lost: &LostSignal, now: Instant) -> bool {
    if lost.ceiling().is_none_or(|ceiling| now < ceiling) {
        return false;
    }
    let key = lost.key();
    tracing::warn!(
        key,
        "lock lease lost: the hold reached its max_hold, no longer renewed"
    );
    telemetry::lease_lost("max_hold");
    lost.fire();
    true
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
