//! Where a manager finds its Redis server each time it opens a connection: a fixed address, or
//! the master that a set of Sentinels names at that moment (so that every connection opened after
//! a failover goes to the new master).

use std::sync::Arc;

use redis::sentinel::{SentinelClient, SentinelNodeConnectionInfo, SentinelServerType};
use redis::{ConnectionInfo, RedisResult};
use tokio::sync::Mutex;

use crate::error::LockError;

/// The server a manager's connections go to.
#[derive(Clone)]
pub(crate) enum Locator {
    /// Always this server.
    Fixed(Box<ConnectionInfo>),
    /// The current master of a Sentinel-monitored service.
    Sentinel(Arc<SentinelMaster>),
}

/// Asks the Sentinels which server is the master of `service` now.
pub(crate) struct SentinelMaster {
    sentinels: Mutex<SentinelClient>,
    service: String,
}

impl std::fmt::Debug for Locator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.describe())
    }
}

impl From<ConnectionInfo> for Locator {
    fn from(info: ConnectionInfo) -> Self {
        Locator::Fixed(Box::new(info))
    }
}

impl Locator {
    /// The master of `service` as the Sentinels of `infos` name it. Its connections use the
    /// credentials and database of the first Sentinel's URL (a deployment usually shares them).
    pub(crate) fn sentinel(infos: Vec<ConnectionInfo>, service: &str) -> Result<Self, LockError> {
        let bad =
            |err: redis::RedisError| LockError::Config(format!("invalid Sentinel setup: {err}"));
        let first = infos.first().ok_or_else(|| {
            LockError::Config("no Sentinel URL: at least one is needed".to_owned())
        })?;
        let node = SentinelNodeConnectionInfo::default()
            .set_redis_connection_info(first.redis_settings().clone());
        let service = service.to_owned();
        let client = SentinelClient::build(
            infos,
            service.clone(),
            Some(node),
            SentinelServerType::Master,
        )
        .map_err(bad)?;
        Ok(Locator::Sentinel(Arc::new(SentinelMaster {
            sentinels: Mutex::new(client),
            service,
        })))
    }

    /// Where a connection opened now goes.
    pub(crate) async fn current(&self) -> RedisResult<ConnectionInfo> {
        match self {
            Locator::Fixed(info) => Ok(ConnectionInfo::clone(info)),
            Locator::Sentinel(master) => {
                let client = master.sentinels.lock().await.async_get_client().await?;
                Ok(client.get_connection_info().clone())
            }
        }
    }

    /// `host:port`, or the Sentinel service, for errors (never a password).
    pub(crate) fn describe(&self) -> String {
        match self {
            Locator::Fixed(info) => info.addr().to_string(),
            Locator::Sentinel(master) => {
                format!("the master of Sentinel service {:?}", master.service)
            }
        }
    }
}
