//! A manager on a Redis Cluster: script calls through one redis-rs cluster connection (routed by
//! the slot of the lock's keys, `MOVED` and `ASK` followed), and an inbox on sharded pub/sub.

use std::sync::Arc;

use redis::cluster::ClusterClientBuilder;
use redis::ConnectionInfo;

use super::channels::Channels;
use super::cluster_inbox::ClusterInbox;
use super::connect::{pass_on, Settings};
use super::pool::ClusterCommands;
use super::{scripts, CommandPool, KeySpace, RedisBackend};
use crate::backend::{InboxStop, Wiring};
use crate::error::LockError;

impl RedisBackend {
    /// The manager's backend on the cluster that `seeds` (some of its nodes) belong to, with its
    /// inbox ready to subscribe.
    pub(crate) async fn connect_cluster(
        seeds: Vec<ConnectionInfo>,
        settings: &Settings,
        wiring: &Wiring,
    ) -> Result<(Arc<RedisBackend>, InboxStop), LockError> {
        if seeds.is_empty() {
            return Err(LockError::Config(
                "no cluster node: at least one is needed".into(),
            ));
        }
        let unavailable = |err: redis::RedisError| LockError::unavailable("", err);
        let timeout = settings.command_timeout;
        let commands = ClusterClientBuilder::new(seeds.clone())
            .connection_timeout(timeout)
            .response_timeout(timeout)
            .build()
            .map_err(|err| LockError::Config(format!("invalid cluster setup: {err}")))?;
        let commands = commands.get_async_connection().await.map_err(unavailable)?;
        let keys = KeySpace::new(&settings.namespace);
        let channels = Arc::new(Channels::per_slot(&keys));
        let (id, waiters) = (wiring.manager_id.clone(), wiring.waiters.clone());
        let reconnected = wiring.reconnected.clone();
        let inbox =
            ClusterInbox::connect(seeds, timeout, id, channels.clone(), waiters, reconnected);
        let inbox = inbox.await.map_err(unavailable)?;
        let backend = Arc::new(RedisBackend {
            pool: CommandPool::Cluster(ClusterCommands(commands)),
            channels,
            scripts: &scripts::SHARDED,
            cluster: Some(inbox.clone()),
            keys,
            manager_id: wiring.manager_id.clone(),
            timeout,
            eviction: settings.eviction,
        });
        inbox.pass_unclaimed_to(pass_on(backend.clone(), wiring));
        let mut stop = InboxStop::default();
        let stopped = stop.add();
        tokio::spawn(async move {
            let _ = stopped.await;
            inbox.close().await;
        });
        Ok((backend, stop))
    }
}
