//! `LockManager::ping`: readiness, for a service's readiness probe.

use super::LockManager;
use crate::error::LockError;

impl LockManager {
    /// Whether the backend can be reached now: `Ok` when a lock could be taken.
    ///
    /// Serve it from a readiness probe (`/ready`): a replica whose Redis is down then gets no
    /// traffic instead of answering 503 to each request. On Redis it PINGs every connection the
    /// manager uses: the command connections and the inbox (whose wake-ups a waiting request
    /// needs). A quorum is ready when a majority of its masters answer (each master's commands
    /// and inbox), as a lock can be taken then; a cluster when every master answers. Each PING is
    /// bounded by the command timeout, so a frozen server fails the probe within it
    /// ([`LockError::Unavailable`], naming the server). The memory backend is always ready. After
    /// [`shutdown`](LockManager::shutdown) it fails with [`LockError::Closed`].
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), tower_lock::LockError> {
    /// let manager = tower_lock::LockManager::memory();
    /// manager.ping().await?;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn ping(&self) -> Result<(), LockError> {
        if self.shared.closing.is_closed() {
            return Err(LockError::Closed);
        }
        self.shared.ready.check().await
    }
}
