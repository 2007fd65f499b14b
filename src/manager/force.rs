//! `LockManager::force_release`: an operator ends the holds of a lock that is stuck, and the
//! lock passes on as on a release.

use super::LockManager;
use crate::error::LockError;
use crate::key::LockKey;

impl LockManager {
    /// End every hold of lock `key` now, whoever holds it; true when a hold was ended.
    ///
    /// It is for operators: a holder that hangs while its watchdog keeps renewing would keep
    /// the lock for ever. The lock passes on as on a release (the next waiter is granted or
    /// woken), and its fencing counter moves past every token the old holders were given, so
    /// that a store that checks tokens refuses their late writes. An old holder learns of it
    /// at its next renewal, within a third of the lease: its guard's `lost()` fires. Until
    /// then it may still believe it holds the lock; only fencing tokens protect against it.
    /// On Redis it is one script call on the lock's server (on a cluster, the lock's shard; on
    /// a quorum, on every master that answers, a majority at least);
    /// [`LockError::Unavailable`] when the server cannot be reached. Each forced release is
    /// logged at WARN.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), tower_lock::LockError> {
    /// use tower_lock::{LockManager, LockOptions};
    /// let manager = LockManager::memory();
    /// let _stuck = manager.acquire("account:42", &LockOptions::exclusive()).await?;
    /// assert!(manager.force_release("account:42").await?);
    /// assert!(!manager.force_release("account:42").await?);
    /// # Ok(())
    /// # }
    /// ```
    pub async fn force_release(&self, key: &str) -> Result<bool, LockError> {
        if self.shared.closing.is_closed() {
            return Err(LockError::Closed);
        }
        let id = self.shared.backend.lock_id(&LockKey::new(key)?);
        let ended = (self.shared.backend.force_release(&id).await).map_err(|source| {
            LockError::Unavailable {
                key: key.to_owned(),
                source,
            }
        })?;
        if ended {
            tracing::warn!(
                lock = key,
                manager = &*self.shared.id,
                label = &*self.shared.label,
                "forced the release of a lock: its holders lose it at their next renewal"
            );
        }
        Ok(ended)
    }
}
