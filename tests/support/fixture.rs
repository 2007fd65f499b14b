//! Where the locks of one test live: the memory backend, a real redis-server, or (feature
//! `cluster`) a real Redis Cluster.

use tower_lock::LockManager;

use super::{RedisServer, Reply};

/// The backend of one test.
pub enum Fixture {
    /// One in-memory manager (every "replica" shares it, as one process would).
    Memory(LockManager),
    /// A fresh redis-server of this test's own.
    Redis(RedisServer),
    /// A fresh Redis Cluster of this test's own (3 masters, 3 replicas).
    #[cfg(feature = "cluster")]
    Cluster(super::cluster::Cluster),
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

    /// A fixture with its own Redis Cluster.
    #[cfg(feature = "cluster")]
    pub fn cluster() -> Self {
        Fixture::Cluster(super::cluster::Cluster::start())
    }

    /// A manager: on Redis a new one each call (like separate replicas); in memory the one manager.
    pub async fn manager(&self) -> LockManager {
        match self {
            Fixture::Memory(m) => m.clone(),
            Fixture::Redis(server) => LockManager::redis(&server.url())
                .await
                .expect("redis manager"),
            #[cfg(feature = "cluster")]
            Fixture::Cluster(cluster) => LockManager::cluster(cluster.urls())
                .await
                .expect("cluster manager"),
        }
    }

    /// A manager as [`manager`](Self::manager) makes it, naming its process `label` (in memory,
    /// the one manager keeps its default label: the host name and process id).
    pub async fn labelled(&self, label: &str) -> LockManager {
        let builder = LockManager::builder().label(label);
        match self {
            Fixture::Memory(m) => return m.clone(),
            Fixture::Redis(server) => builder.redis(server.url()).build().await,
            #[cfg(feature = "cluster")]
            Fixture::Cluster(cluster) => builder.cluster(cluster.urls()).build().await,
        }
        .expect("manager")
    }

    /// The standalone redis-server, if any.
    pub fn server(&self) -> Option<&RedisServer> {
        match self {
            Fixture::Redis(server) => Some(server),
            _ => None,
        }
    }

    /// Whether every "replica" shares one in-memory manager.
    pub fn is_memory(&self) -> bool {
        matches!(self, Fixture::Memory(_))
    }

    /// The servers that hold lock data: the redis-server, or the cluster's masters (none in
    /// memory).
    pub fn data_nodes(&self) -> Vec<&RedisServer> {
        match self {
            Fixture::Memory(_) => vec![],
            Fixture::Redis(server) => vec![server],
            #[cfg(feature = "cluster")]
            Fixture::Cluster(cluster) => cluster.masters(),
        }
    }

    /// `args` run on the server that holds `key` (a cluster: the master of its slot); `None` in
    /// memory.
    #[cfg_attr(not(feature = "cluster"), allow(unused_variables))]
    pub fn cmd_for(&self, key: &str, args: &[&str]) -> Option<Reply> {
        match self {
            Fixture::Memory(_) => None,
            Fixture::Redis(server) => Some(server.cmd(args)),
            #[cfg(feature = "cluster")]
            Fixture::Cluster(cluster) => Some(cluster.master_of(key).cmd(args)),
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

            #[cfg(feature = "cluster")]
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn cluster() {
                super::$name($crate::support::fixture::Fixture::cluster()).await;
            }
        }
    )*};
}
