//! What a request holds: the guards of its locks, the owner they are taken for, and what the handler
//! is told about them in the request's extensions.

use std::time::Instant;

use super::metrics;
use crate::manager::{LockGuard, LockInfo};
use crate::manager::{LockManager, LockOwner};
use futures_util::future::BoxFuture;

/// The extensions of a request of either web stack (`http` 1.x or actix-web), for what the request
/// core reads and writes there.
pub(crate) trait Extensions {
    fn get<T: Send + Sync + 'static>(&self) -> Option<&T>;
    fn insert<T: Clone + Send + Sync + 'static>(&mut self, value: T);
    fn remove<T: Send + Sync + 'static>(&mut self) -> Option<T>;
}

impl Extensions for http::Extensions {
    fn get<T: Send + Sync + 'static>(&self) -> Option<&T> {
        http::Extensions::get(self)
    }

    fn insert<T: Clone + Send + Sync + 'static>(&mut self, value: T) {
        http::Extensions::insert(self, value);
    }

    fn remove<T: Send + Sync + 'static>(&mut self) -> Option<T> {
        http::Extensions::remove(self)
    }
}

/// The owner a request's locks are taken for: the request's own (stored in its extensions by the
/// first layer), so that nested layers and handlers re-enter; a fresh one when the request's owner
/// belongs to another manager (a nested layer over a different backend).
pub(crate) fn owner(manager: &LockManager, extensions: &mut impl Extensions) -> LockOwner {
    match extensions.get::<LockOwner>() {
        Some(owner) if owner.belongs_to(manager) => owner.clone(),
        Some(_) => manager.owner(),
        None => {
            let owner = manager.owner();
            extensions.insert(owner.clone());
            owner
        }
    }
}

/// Tell the handler what the request holds: a [`LockInfo`] for the first lock of `guards`, and
/// every lock of every layer so far in [`HeldLocks`].
pub(crate) fn publish(guards: &RequestGuards, extensions: &mut impl Extensions) {
    let mut infos = guards.infos();
    let Some(first) = infos.next() else {
        return;
    };
    let mut held = extensions.remove::<HeldLocks>().unwrap_or_default();
    held.push(first.clone());
    for info in infos {
        held.push(info);
    }
    extensions.insert(held);
    extensions.insert(first);
}

/// The guards of the locks one request holds through one layer or middleware; dropping it releases
/// them (in the background) and records how long they were held.
pub(crate) struct RequestGuards {
    guards: Vec<LockGuard>,
    since: Instant,
}

impl RequestGuards {
    pub(super) fn new(guards: Vec<LockGuard>) -> Self {
        RequestGuards {
            guards,
            since: Instant::now(),
        }
    }

    /// What handlers may know about each lock, in acquisition order.
    pub(crate) fn infos(&self) -> impl Iterator<Item = LockInfo> + '_ {
        self.guards.iter().map(LockGuard::info)
    }

    /// The first lock name, for messages.
    pub(crate) fn first_key(&self) -> Option<String> {
        self.guards.first().map(|guard| guard.key().to_owned())
    }

    /// Resolves when any of the leases is known lost.
    pub(crate) fn lost(&self) -> BoxFuture<'static, ()> {
        let infos: Vec<LockInfo> = self.infos().collect();
        Box::pin(async move {
            let losses = infos.iter().map(|info| Box::pin(info.lost()));
            if infos.is_empty() {
                return std::future::pending().await;
            }
            futures_util::future::select_all(losses).await;
        })
    }
}

impl Drop for RequestGuards {
    fn drop(&mut self) {
        let lost = self.guards.iter().any(LockGuard::is_lost);
        metrics::held(self.since.elapsed(), lost);
    }
}

impl std::fmt::Debug for RequestGuards {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RequestGuards")
            .field(
                "keys",
                &self.guards.iter().map(LockGuard::key).collect::<Vec<_>>(),
            )
            .finish()
    }
}

/// Every lock held for a request by the lock layers (or actix-web middlewares) it went through,
/// outermost first: a request extension, for handlers behind several layers ([`LockInfo`] alone
/// gives the innermost layer's first lock).
#[derive(Debug, Clone, Default)]
pub struct HeldLocks(Vec<LockInfo>);

impl HeldLocks {
    pub(crate) fn push(&mut self, info: LockInfo) {
        self.0.push(info);
    }

    /// The locks, outermost layer first, each layer's in acquisition (sorted) order.
    pub fn iter(&self) -> impl Iterator<Item = &LockInfo> {
        self.0.iter()
    }

    /// The lock named `key`, if one is held.
    pub fn get(&self, key: &str) -> Option<&LockInfo> {
        self.0.iter().find(|info| info.key() == key)
    }

    /// How many holds (a re-entered lock counts once per layer).
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// True when no lock is held.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// True when any of the leases is known lost.
    pub fn any_lost(&self) -> bool {
        self.0.iter().any(LockInfo::is_lost)
    }
}
