//! `LockManager::inspect` and `LockManager::list`: who holds a lock and who waits, across every
//! process that uses it, for operators and tools.

use super::LockManager;
use crate::error::LockError;
use crate::key::LockKey;
use crate::state::LockState;

/// How many locks [`LockManager::list`] returns at most.
///
/// Each lock listed costs one read of the server: a cap keeps a forgotten prefix from reading a
/// whole namespace. [`LockManager::list_limited`] takes another.
pub const DEFAULT_LIST_LIMIT: usize = 100;

impl LockManager {
    /// The state of lock `key` now: its holders and its waiters in queue order.
    ///
    /// On Redis it is one read-only script call on the lock's server (on a cluster, the lock's
    /// shard), so the holders and waiters shown existed together, with leases and wait times by
    /// the server's clock. On a quorum each master is read so, and a hold shows where a majority
    /// keeps it (its token: the highest a master issued for it). A free lock is a state with no
    /// holders, not an error; [`LockError::Unavailable`] when the server (a majority of
    /// masters) cannot be reached.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), tower_lock::LockError> {
    /// use tower_lock::{LockManager, LockOptions};
    /// let manager = LockManager::memory();
    /// let guard = manager.acquire("account:42", &LockOptions::exclusive()).await?;
    /// let state = manager.inspect("account:42").await?;
    /// assert_eq!(state.holders[0].token, Some(guard.fencing_token()));
    /// # Ok(())
    /// # }
    /// ```
    pub async fn inspect(&self, key: &str) -> Result<LockState, LockError> {
        if self.shared.closing.is_closed() {
            return Err(LockError::Closed);
        }
        let id = self.shared.backend.lock_id(&LockKey::new(key)?);
        (self.shared.backend.inspect(&id, key).await).map_err(|source| LockError::Unavailable {
            key: key.to_owned(),
            source,
        })
    }

    /// The locks of this manager's namespace whose names start with `prefix` and that are held
    /// or waited for, [`DEFAULT_LIST_LIMIT`] at most.
    ///
    /// It answers "what is locked under `accounts/` right now". See
    /// [`list_limited`](LockManager::list_limited) for the rules.
    pub async fn list(&self, prefix: &str) -> Result<Vec<LockState>, LockError> {
        self.list_limited(prefix, DEFAULT_LIST_LIMIT).await
    }

    /// As [`list`](LockManager::list), `limit` locks at most.
    ///
    /// On Redis the locks are found with SCAN (never KEYS, which would stall the server), and
    /// each is read as [`inspect`](LockManager::inspect) reads it: each state is consistent,
    /// the list is not one instant. A name too long to be stored as itself (over 200 bytes
    /// escaped) is stored hashed, so no prefix but `""` finds it. On a cluster SCAN walks every
    /// master; on a quorum, every master that answers.
    pub async fn list_limited(
        &self,
        prefix: &str,
        limit: usize,
    ) -> Result<Vec<LockState>, LockError> {
        if self.shared.closing.is_closed() {
            return Err(LockError::Closed);
        }
        (self.shared.backend.list(prefix, limit).await).map_err(|source| LockError::Unavailable {
            key: prefix.to_owned(),
            source,
        })
    }
}
