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
        // Redirects (MOVED, ASK) are retried at once. A TRYAGAIN (a lock whose slot is being moved,
        // its keys not all on one node yet) comes back after two short waits, so that a request
        // that waits can wait for the move to end (see `moving_slot`) instead of redis-rs waiting
        // out the command timeout with backoffs of a second or more.
        let commands = ClusterClientBuilder::new(seeds.clone())
            .connection_timeout(timeout)
            .response_timeout(timeout)
            .retries(3)
            .min_retry_wait(5)
            .max_retry_wait(50)
            .build()
            .map_err(|err| LockError::Config(format!("invalid cluster setup: {err}")))?;
        let commands = commands.get_async_connection().await.map_err(unavailable)?;
        let keys = KeySpace::new(&settings.namespace);
        let channels = Arc::new(Channels::per_slot(&keys));
        let (id, waiters) = (wiring.manager_id.clone(), wiring.waiters.clone());
        let wake = (waiters, wiring.reconnected.clone());
        let proof = wiring.inbox_proof.clone();
        let inbox = ClusterInbox::connect(seeds, timeout, id, channels.clone(), wake, proof);
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
            whole: false,
            waiters: wiring.waiters.clone(),
            plain: Default::default(),
        });
        inbox.pass_unclaimed_to(pass_on(backend.clone(), wiring));
        wiring.ready.add(crate::backend::ServerCheck {
            name: "the Redis Cluster".to_owned(),
            backend: backend.clone(),
            inbox: None,
        });
        let mut stop = InboxStop::default();
        let stopped = stop.add();
        tokio::spawn(async move {
            let _ = stopped.await;
            inbox.close().await;
        });
        Ok((backend, stop))
    }
}

/// Whether `err` says the lock's slot is being moved to another master: `TRYAGAIN` (its keys are
/// not all on one node yet, and Redis refuses commands on several keys then), or a redirect
/// (`ASK`, `MOVED`) still left when redis-rs has used up its retries, bouncing between the two
/// masters. Each of them means the script did not run.
pub(super) fn moving_slot(err: &crate::error::BoxError) -> bool {
    use redis::{ErrorKind, ServerErrorKind};
    err.downcast_ref::<redis::RedisError>().is_some_and(|err| {
        matches!(
            err.kind(),
            ErrorKind::Server(
                ServerErrorKind::TryAgain | ServerErrorKind::Ask | ServerErrorKind::Moved
            )
        )
    })
}

#[cfg(test)]
mod tests {
    use super::moving_slot;
    use crate::error::BoxError;

    /// The error redis-rs makes of a server's error answer, as `ScriptCall::invoke` meets it.
    fn answered(resp: &str) -> BoxError {
        let value = redis::parse_redis_value(resp.as_bytes()).expect("an error answer");
        Box::new(value.extract_error().expect_err("an error"))
    }

    #[test]
    fn a_slot_in_motion_is_told_from_other_errors() {
        for moving in [
            "-TRYAGAIN Multiple keys request during rehashing of slot\r\n",
            "-ASK 3999 127.0.0.1:7002\r\n",
            "-MOVED 3999 127.0.0.1:7001\r\n",
        ] {
            assert!(moving_slot(&answered(moving)), "{moving}");
        }
        for other in [
            "-ERR wrong number of arguments\r\n",
            "-CLUSTERDOWN The cluster is down\r\n",
            "-NOSCRIPT No matching script\r\n",
        ] {
            assert!(!moving_slot(&answered(other)), "{other}");
        }
    }
}
