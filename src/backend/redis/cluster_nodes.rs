//! Commands sent to chosen nodes of a Redis Cluster rather than routed by a lock's slot: what
//! `list` needs to walk every master with SCAN.

use redis::cluster_routing::{RoutingInfo, SingleNodeRoutingInfo};
use redis::{cmd, Cmd, FromRedisValue, Value};

use super::pool::ClusterCommands;
use super::{CommandPool, RedisBackend};
use crate::error::BoxError;

impl RedisBackend {
    /// The masters of the cluster (host and port), as `CLUSTER SLOTS` names them: the servers
    /// that `list` walks with SCAN.
    pub(super) async fn masters(&self) -> Result<Vec<(String, u16)>, BoxError> {
        let slots: Value = self
            .on_node(cmd("CLUSTER").arg("SLOTS").clone(), None)
            .await?;
        let Value::Array(ranges) = slots else {
            return Err(format!("CLUSTER SLOTS answered {slots:?}").into());
        };
        let mut masters = Vec::new();
        for range in ranges {
            // [first slot, last slot, [host, port, id, ...], replicas...]
            let Value::Array(parts) = range else { continue };
            let Some(Value::Array(master)) = parts.get(2) else {
                continue;
            };
            let host = master
                .first()
                .and_then(|h| String::from_redis_value(h.clone()).ok());
            let port = master
                .get(1)
                .and_then(|p| u16::from_redis_value(p.clone()).ok());
            if let (Some(host), Some(port)) = (host, port) {
                if !masters.contains(&(host.clone(), port)) {
                    masters.push((host, port));
                }
            }
        }
        Ok(masters)
    }

    /// Run `command` on the master at `host:port`, within the command timeout.
    pub(super) async fn on_master<T: FromRedisValue>(
        &self,
        host: &str,
        port: u16,
        command: Cmd,
    ) -> Result<T, BoxError> {
        let value = self.on_node(command, Some((host, port))).await?;
        Ok(T::from_redis_value(value)?)
    }

    /// Run `command` on the node at `address`, or on any node, within the command timeout.
    async fn on_node(&self, command: Cmd, address: Option<(&str, u16)>) -> Result<Value, BoxError> {
        let CommandPool::Cluster(ClusterCommands(conn)) = &self.pool else {
            return Err("not a cluster".into());
        };
        let node = match address {
            Some((host, port)) => SingleNodeRoutingInfo::ByAddress {
                host: host.to_owned(),
                port,
            },
            None => SingleNodeRoutingInfo::Random,
        };
        let mut conn = conn.clone();
        let routed = conn.route_command(command, RoutingInfo::SingleNode(node));
        match tokio::time::timeout(self.timeout, routed).await {
            Ok(answer) => Ok(answer?),
            Err(_) => Err(format!("no answer within {:?}", self.timeout).into()),
        }
    }
}
