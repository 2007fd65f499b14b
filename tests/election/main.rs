//! Leader election (`LockManager::campaign`, `leader`, `watch_leader`) on the memory backend, one
//! real redis-server and a quorum of masters: candidates elected in arrival order, terms that
//! strictly increase across forced changes with never two leaders at once, and a dead leader
//! replaced within the takeover time, far below the lease.

#[path = "../support/mod.rs"]
mod support;

mod changes;
mod order;

use std::time::Duration;

use tower_lock::LockManager;

use support::masters::Masters;
use support::RedisServer;

/// Long, so that a leader replaced within a few seconds was taken over, not expired.
const LEASE: Duration = Duration::from_secs(30);

/// Where the candidates run: each kind makes managers on one backend.
enum Backend {
    Memory(LockManager),
    Redis(RedisServer),
    Quorum(Masters),
}

impl Backend {
    fn memory() -> Backend {
        let manager = LockManager::builder().lease(LEASE).build();
        Backend::Memory(
            futures_util::FutureExt::now_or_never(manager)
                .unwrap()
                .unwrap(),
        )
    }

    /// A candidate's manager, labelled `label`; on memory, the one manager every candidate
    /// shares (a process's candidates are its owners).
    async fn manager(&self, label: &str) -> LockManager {
        match (self, self.target()) {
            (Backend::Memory(m), _) => m.clone(),
            (_, Some(target)) => target.manager(label).await,
            (_, None) => unreachable!("a server backend has a target"),
        }
    }

    /// Where a manager of another runtime (a process to kill) connects; `None` on memory.
    fn target(&self) -> Option<Target> {
        match self {
            Backend::Memory(_) => None,
            Backend::Redis(server) => Some(Target::Redis(server.url())),
            Backend::Quorum(masters) => Some(Target::Quorum(masters.urls())),
        }
    }

    /// Whether candidates are elected in arrival order (a quorum keeps no queue).
    fn ordered(&self) -> bool {
        !matches!(self, Backend::Quorum(_))
    }
}

/// The URLs of a backend's servers, to build managers anywhere.
#[derive(Clone)]
enum Target {
    Redis(String),
    Quorum(Vec<String>),
}

impl Target {
    async fn manager(&self, label: &str) -> LockManager {
        self.manager_with(label, LEASE).await
    }

    async fn manager_with(&self, label: &str, lease: Duration) -> LockManager {
        let builder = LockManager::builder().lease(lease).label(label);
        let builder = match self {
            Target::Redis(url) => builder.redis(url),
            Target::Quorum(urls) => builder
                .quorum(urls.clone())
                .command_timeout(Duration::from_secs(1)),
        };
        builder.build().await.expect("manager")
    }
}
