//! Where the locks of one test live: the memory backend, or a real redis-server.

use tower_lock::LockManager;

use super::RedisServer;

/// The backend of one test.
pub enum Fixture {
    /// One in-memory manager (every "replica" shares it, as one process would).
    Memory(LockManager),
    /// A fresh redis-server of this test's own.
    Redis(RedisServer),
}

impl Fixture {
    /// An in-memory fixture.
    pub fn memory() -> Self {
        Fixture::Memory(LockManager::memory())
    }

    /// A fixture with its own redis-server.
    pub fn redis() -> Self {
        Fixture::Redis(RedisServer::start())
    }

    /// A manager: on Redis a new one each call (like separate replicas); in memory the one manager.
    pub async fn manager(&self) -> LockManager {
        match self {
            Fixture::Memory(m) => m.clone(),
            Fixture::Redis(server) => LockManager::redis(&server.url())
                .await
                .expect("redis manager"),
        }
    }

    /// The redis-server, if any.
    pub fn server(&self) -> Option<&RedisServer> {
        match self {
            Fixture::Memory(_) => None,
            Fixture::Redis(server) => Some(server),
        }
    }
}

/// Run each named `async fn(Fixture)` against both backends.
#[macro_export]
macro_rules! on_both_backends {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn memory() {
                super::$name($crate::support::fixture::Fixture::memory()).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn redis() {
                super::$name($crate::support::fixture::Fixture::redis()).await;
            }
        }
    )*};
}
