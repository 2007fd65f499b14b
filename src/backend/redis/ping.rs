//! Readiness of one Redis backend's commands: a PING on every connection its commands go on (each
//! pooled connection; each master of a cluster, and the cluster's inbox), each within the
//! backend's command timeout.

use redis::{RedisError, Value};

use super::pool::BrokenFlag;
use super::{CommandPool, RedisBackend};
use crate::error::BoxError;

impl RedisBackend {
    /// Whether every connection the commands go on answers a PING now. A connection that does
    /// not is marked broken, as a failed command's is: the next command opens a fresh one.
    pub(crate) async fn ping(&self) -> Result<(), BoxError> {
        let connections = match &self.pool {
            CommandPool::Own { slots, .. } => slots.len() as u64,
            #[cfg(feature = "cluster")]
            CommandPool::Cluster(commands) => return self.ping_cluster(&commands.0).await,
            _ => 1,
        };
        let asked = (0..connections).map(|hint| self.ping_one(hint));
        let answers = futures_util::future::join_all(asked).await;
        answers.into_iter().collect()
    }

    /// PING the connection of slot `hint` (opened if it must be), within the command timeout.
    async fn ping_one(&self, hint: u64) -> Result<(), BoxError> {
        let timeout = self.timeout;
        let asked = async {
            let (mut channel, broken) = self.pool.conn(hint).await?;
            let answer = channel.query(&redis::cmd("PING")).await;
            settle(answer, &broken)
        };
        match tokio::time::timeout(timeout, asked).await {
            Ok(answered) => answered,
            Err(_) => {
                if let Some((_, broken)) = self.pool.open_link(hint) {
                    broken.timed_out();
                }
                Err(format!("no answer to PING within {timeout:?}").into())
            }
        }
    }

    /// PING every master of the cluster, through the commands' connection and the inbox's.
    #[cfg(feature = "cluster")]
    async fn ping_cluster(
        &self,
        commands: &redis::cluster_async::ClusterConnection,
    ) -> Result<(), BoxError> {
        let timeout = self.timeout;
        let inbox = async {
            match &self.cluster {
                Some(inbox) => inbox.ping_masters().await,
                None => Ok(()),
            }
        };
        let asked = async {
            let (commands, inbox) = tokio::join!(ping_masters(commands.clone()), inbox);
            commands.map_err(|err| format!("commands: {err}"))?;
            inbox.map_err(|err| format!("inbox: {err}").into())
        };
        match tokio::time::timeout(timeout, asked).await {
            Ok(answered) => answered,
            Err(_) => Err(format!("no answer to PING from every master within {timeout:?}").into()),
        }
    }
}

/// A PING's answer: a connection-level failure marks the connection broken.
fn settle(answer: Result<Value, RedisError>, broken: &BrokenFlag) -> Result<(), BoxError> {
    match answer {
        Ok(Value::ServerError(err)) => Err(RedisError::from(err).into()),
        Ok(_) => Ok(()),
        Err(err) => {
            broken.check(&err);
            Err(err.into())
        }
    }
}

/// PING every master of a cluster on `conn`.
#[cfg(feature = "cluster")]
pub(super) async fn ping_masters(
    mut conn: redis::cluster_async::ClusterConnection,
) -> Result<(), RedisError> {
    use redis::cluster_routing::{MultipleNodeRoutingInfo, ResponsePolicy, RoutingInfo};
    let every_master = RoutingInfo::MultiNode((
        MultipleNodeRoutingInfo::AllMasters,
        Some(ResponsePolicy::AllSucceeded),
    ));
    conn.route_command(redis::cmd("PING"), every_master)
        .await
        .map(drop)
}
