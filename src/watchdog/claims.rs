//! Fair grants under their short claim lease, which the watchdog's next extension round extends.
//!
//! # Implementation notes: the fair grant's claim lease
//!
//! A fair release hands the lock to the head of the queue inside the release script and tells the
//! waiter's manager by a message. The script cannot know whether that waiter is still alive, so
//! the grant starts with a short *claim lease*: the fair eviction time (`fair_eviction`), the
//! same bound after which a silent waiter would have been evicted. A grant to a waiter that died
//! meanwhile therefore frees itself within that time, and the next waiter gets it.
//!
//! The waiter's side, step by step:
//!
//! 1. `manager/acquire.rs` (`take_grant`) builds the guard at once, without a round trip. Its
//!    lost signal ([`crate::lease::LostSignal`]) is valid for the claim only, counted from the
//!    later of two moments the grant is known to follow: the attempt that queued the request, and
//!    the last heartbeat that found it still queued ([`super::Queued::confirmed`]). A process that
//!    learns of the grant late (it was frozen) never counts the claim from too late a start.
//! 2. The grant goes in [`Claims`]; the watchdog's next extension round (every eviction/3, in
//!    batches per lease) renews it to the request's lease and moves the guard's deadline with it.
//!    From then on the lease is the watchdog's like any other.
//! 3. A grant whose extension finds the lock gone is lost at once; one whose extension failed is
//!    tried again next round, while its guard's deadline stays the claim's end, so the guard
//!    reports lost before Redis can have freed the lock.
//! 4. Heartbeats run in rounds of their own, so slow extensions never delay the heartbeats that
//!    keep the other queued waiters alive.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use futures_util::future::join_all;

use crate::backend::{Backend, LockParty};
use crate::lease::LostSignal;
use crate::saturating::later;
use crate::telemetry;

/// Fair grants held under their short claim lease: the next heartbeat round extends each to its
/// holder's lease, in batches, instead of one command per grant on the hand-off path.
#[derive(Debug, Default)]
pub(crate) struct Claims {
    table: Mutex<ClaimTable>,
}

#[derive(Debug, Default)]
struct ClaimTable {
    fresh: HashMap<LockParty, Claim>,
    /// While a round extends the claims it took: the guards released since (by their lost
    /// signals), whose claims are not to be tried again.
    released: Option<Vec<Arc<LostSignal>>>,
}

/// A grant to extend: to which lease, and the lost signal of its guard, whose deadline moves with
/// the extension.
#[derive(Debug, Clone)]
struct Claim {
    lease: Duration,
    lost: Arc<LostSignal>,
}

impl Claims {
    fn table(&self) -> MutexGuard<'_, ClaimTable> {
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `lock` was granted under a claim lease; extend it to `lease` at the next heartbeat round.
    pub(crate) fn add(&self, lock: LockParty, lease: Duration, lost: Arc<LostSignal>) {
        self.table().fresh.insert(lock, Claim { lease, lost });
    }

    /// Claims whose extension failed: try again at the next round, unless released meanwhile
    /// (renewals go by owner: a later hold of the same owner must not be stretched), lost, or
    /// granted again.
    fn retry(&self, claims: Vec<(LockParty, Claim)>) {
        let mut table = self.table();
        for (lock, claim) in claims {
            let released = (table.released.as_ref())
                .is_some_and(|r| r.iter().any(|l| Arc::ptr_eq(l, &claim.lost)));
            if !released && !claim.lost.is_lost() {
                table.fresh.entry(lock).or_insert(claim);
            }
        }
    }

    /// The guard whose lost signal is `lost` released `lock`: nothing of it to extend. A claim of
    /// a later grant to the same owner (the guard's lease was lost meanwhile) stays.
    pub(crate) fn remove(&self, lock: &LockParty, lost: &Arc<LostSignal>) {
        let mut table = self.table();
        if table
            .fresh
            .get(lock)
            .is_some_and(|claim| Arc::ptr_eq(&claim.lost, lost))
        {
            table.fresh.remove(lock);
        }
        if let Some(released) = table.released.as_mut() {
            released.push(lost.clone());
        }
    }

    /// The claims to extend in this round; releases are noted until [`Claims::round_done`].
    fn take_all(&self) -> Vec<(LockParty, Claim)> {
        let mut table = self.table();
        table.released = Some(Default::default());
        table.fresh.drain().collect()
    }

    fn round_done(&self) {
        self.table().released = None;
    }
}

/// Extend fresh fair grants from their claim lease to their holders' leases (cut to end at their
/// ceilings), in batches per lease sent at once, and move their guards' deadlines with them. A
/// grant found gone is lost; one whose extension failed is tried again at the next round (its
/// guard's deadline is still the claim's end).
pub(super) async fn extend_claims(backend: &Backend, claims: &Claims) {
    let now = Instant::now();
    let mut fresh = claims.take_all();
    // a grant is extended to its ceiling at most; one past it is not extended (it is lost there)
    fresh.retain_mut(|(_, claim)| match claim.lost.ceiling() {
        Some(ceiling) if ceiling <= now => false,
        Some(ceiling) => {
            claim.lease = claim.lease.min(ceiling.duration_since(now));
            true
        }
        None => true,
    });
    fresh.sort_by_key(|(_, claim)| claim.lease);
    let batches = (fresh.chunk_by(|a, b| a.1.lease == b.1.lease))
        .flat_map(|same_lease| same_lease.chunks(backend.renew_batch_size()))
        .map(|batch| extend_batch(backend, claims, batch));
    join_all(batches).await;
    claims.round_done();
}

/// Extend one batch of grants that share a lease.
async fn extend_batch(backend: &Backend, claims: &Claims, batch: &[(LockParty, Claim)]) {
    let lease = batch[0].1.lease;
    let locks: Vec<LockParty> = batch.iter().map(|(lock, _)| lock.clone()).collect();
    let started = Instant::now();
    match backend.renew(&locks, lease).await {
        Ok(extended) => {
            for ((_, claim), ok) in batch.iter().zip(extended) {
                if ok && claim.lost.extend(later(started, lease)) {
                    claim.lost.prove(started);
                    claim.lost.renewed(started);
                } else {
                    let key = claim.lost.key();
                    tracing::warn!(key, "fair grant lost before its claim lease was extended");
                    telemetry::lease_lost("claim");
                    claim.lost.fire();
                }
            }
        }
        Err(err) => {
            tracing::warn!(error = %err, grants = batch.len(), "could not extend fair grants");
            claims.retry(batch.to_vec());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::waiters::LockId;

    #[test]
    fn an_earlier_guards_release_leaves_a_later_grants_claim() {
        let claims = Claims::default();
        let lock = LockParty {
            id: LockId::new("k"),
            owner: Arc::from("m:1"),
        };
        let earlier = Arc::new(LostSignal::new(Arc::from("k"), None));
        let later = Arc::new(LostSignal::new(Arc::from("k"), None));
        claims.add(lock.clone(), Duration::from_secs(30), later.clone());
        // the earlier guard of the same owner is released: the later grant's claim stays
        claims.remove(&lock, &earlier);
        assert_eq!(claims.take_all().len(), 1);
        claims.round_done();
        claims.add(lock.clone(), Duration::from_secs(30), later.clone());
        claims.remove(&lock, &later);
        assert!(claims.take_all().is_empty());
    }
}
