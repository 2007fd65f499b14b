//! `LockGuards`: the locks of one set, held together and released together.

use futures_util::future::BoxFuture;

use crate::error::LockError;
use crate::manager::LockGuard;

/// Several locks held together, from [`LockOwner::acquire_all`](crate::LockOwner::acquire_all):
/// one [`LockGuard`] per lock, in lock order (the order of their names).
///
/// A job that moves money between two accounts needs both at once, and each lock's fencing token
/// for the storage of that account: [`LockGuards::get`] gives each lock's guard. Release them all
/// with [`LockGuards::release`] to learn whether every lease held to the end; dropping the set
/// releases every lock without waiting, as dropping a guard does.
#[derive(Debug)]
#[must_use = "the locks are released as soon as the guards are dropped"]
pub struct LockGuards {
    /// Sorted by key, each key once.
    guards: Vec<LockGuard>,
}

impl LockGuards {
    pub(crate) fn new(guards: Vec<LockGuard>) -> Self {
        LockGuards { guards }
    }

    /// The lock names, in lock order.
    pub fn keys(&self) -> impl ExactSizeIterator<Item = &str> + '_ {
        self.guards.iter().map(LockGuard::key)
    }

    /// The guard of each lock, in lock order.
    pub fn iter(&self) -> std::slice::Iter<'_, LockGuard> {
        self.guards.iter()
    }

    /// The guard of the lock `key`, if it is one of the set.
    pub fn get(&self, key: &str) -> Option<&LockGuard> {
        let found = self.guards.binary_search_by(|guard| guard.key().cmp(key));
        found.ok().map(|at| &self.guards[at])
    }

    /// The fencing token of the lock `key`, if it is one of the set (see
    /// [`LockInfo::fencing_token`](crate::LockInfo::fencing_token)). Each lock has its own: pass
    /// each to the storage that lock protects.
    pub fn fencing_token(&self, key: &str) -> Option<u64> {
        self.get(key).map(LockGuard::fencing_token)
    }

    /// True once any of the leases is known lost or may have run out: the set no longer protects
    /// all it was taken for.
    pub fn is_lost(&self) -> bool {
        self.guards.iter().any(LockGuard::is_lost)
    }

    /// Resolves when any of the leases is known lost or may have run out (see
    /// [`LockGuards::is_lost`]); pending forever while all are held.
    pub async fn lost(&self) {
        let losses: Vec<BoxFuture<'_, ()>> = self
            .guards
            .iter()
            .map(|guard| -> BoxFuture<'_, ()> { Box::pin(guard.lost()) })
            .collect();
        if losses.is_empty() {
            return std::future::pending().await;
        }
        futures_util::future::select_all(losses).await;
    }

    /// Release every lock now, all at once. Every release is made even when one fails; the first
    /// failure in lock order is returned ([`LockError::NotHeld`] when that lease had been lost,
    /// [`LockError::Unavailable`] when the backend could not be reached).
    pub async fn release(self) -> Result<(), LockError> {
        let releases = self.guards.into_iter().map(LockGuard::release);
        let released = futures_util::future::join_all(releases).await;
        released.into_iter().collect()
    }

    /// The guards, in lock order, to release each on its own.
    pub fn into_guards(self) -> Vec<LockGuard> {
        self.guards
    }
}

impl<'a> IntoIterator for &'a LockGuards {
    type Item = &'a LockGuard;
    type IntoIter = std::slice::Iter<'a, LockGuard>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}
