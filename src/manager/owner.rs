//! The holder identity of one request, and how its id is made.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use super::LockGuard;
use super::{LockManager, Shared};
use crate::error::LockError;
use crate::ids::{numbered, OwnerId};
use crate::options::LockOptions;

/// The holder identity of one request: locks it takes can be re-entered by it (each re-entry is one
/// more hold, released by its own guard; the lock frees when the last hold goes). Clone it to pass it
/// down; the layer stores one in each request's extensions.
#[derive(Clone, Debug)]
pub struct LockOwner {
    id: OwnerId,
    manager: LockManager,
    /// The request it serves, as lock states show it.
    request: Option<Arc<str>>,
}

impl LockOwner {
    pub(super) fn new(id: OwnerId, manager: LockManager) -> Self {
        LockOwner {
            id,
            manager,
            request: None,
        }
    }

    /// Name the request (or job) this owner serves, as [`LockManager::inspect`] shows its
    /// holds to operators.
    ///
    /// The layer names each request's owner by its method and matched route. A job names its
    /// own, so that "who holds it" has an answer a person can act on. Tabs, line breaks and `|`
    /// become spaces, and the name is cut at 200 bytes: it travels with every acquisition.
    pub fn request(mut self, what: impl AsRef<str>) -> Self {
        self.request = Some(crate::state::clean_label(what.as_ref()));
        self
    }

    /// Wait for the lock `key` and hold it; re-enters a lock this owner already holds.
    pub async fn acquire(&self, key: &str, opts: &LockOptions) -> Result<LockGuard, LockError> {
        self.manager.supports(key, opts)?;
        let guard = self
            .manager
            .shared
            .acquire(key, opts, (&self.id, self.request.as_ref()), true)
            .await?;
        guard.ok_or_else(|| LockError::Timeout {
            key: key.to_owned(),
            waited: Duration::ZERO,
        })
    }

    /// Take (or re-enter) the lock `key` if possible without waiting; `Ok(None)` when someone else
    /// holds it.
    pub async fn try_acquire(
        &self,
        key: &str,
        opts: &LockOptions,
    ) -> Result<Option<LockGuard>, LockError> {
        self.manager.supports(key, opts)?;
        self.manager
            .shared
            .acquire(key, opts, (&self.id, self.request.as_ref()), false)
            .await
    }

    /// The manager this owner belongs to.
    pub fn manager(&self) -> &LockManager {
        &self.manager
    }

    /// True when this owner was made by `manager` (or a clone of it): only then do its locks go
    /// through that manager's backend.
    pub fn belongs_to(&self, manager: &LockManager) -> bool {
        Arc::ptr_eq(&self.manager.shared, &manager.shared)
    }
}

impl Shared {
    /// `<manager id>:<seq>`.
    pub(super) fn new_owner_id(&self) -> OwnerId {
        let seq = self.next_owner.fetch_add(1, Ordering::Relaxed);
        OwnerId::new(numbered(&self.id, ':', seq, None))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn owner_ids_are_the_manager_id_and_a_count() {
        let manager = LockManager::memory();
        let shared = &manager.shared;
        let (first, second) = (manager.owner(), manager.owner());
        assert_eq!(*first.id, format!("{}:1", shared.id));
        assert_eq!(*second.id, format!("{}:2", shared.id));
        shared.next_owner.store(9, Ordering::Relaxed);
        assert_eq!(*manager.owner().id, format!("{}:9", shared.id));
        assert_eq!(*manager.owner().id, format!("{}:10", shared.id));
        shared.next_owner.store(u64::MAX, Ordering::Relaxed);
        assert_eq!(*manager.owner().id, format!("{}:{}", shared.id, u64::MAX));
    }
}
