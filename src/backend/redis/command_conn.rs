//! A command connection of the crate's own pool: the lean link on plain TCP, redis-rs's
//! multiplexed connection over TLS or a Unix socket (whose set-up redis-rs knows: certificates,
//! paths).

use std::time::Duration;

use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::{AsyncConnectionConfig, Client, Cmd, ConnectionAddr, ConnectionInfo, Pipeline};
use redis::{RedisFuture, RedisResult, Value};

use super::link::Link;

/// One connection to one server; clones share it.
#[derive(Clone)]
pub(crate) enum CommandConn {
    Link(Link),
    Multiplexed(MultiplexedConnection),
}

impl CommandConn {
    /// Connect to the server of `info` (logged in, its database selected) within `timeout`.
    pub(crate) async fn open(info: ConnectionInfo, timeout: Duration) -> RedisResult<Self> {
        if let ConnectionAddr::Tcp(host, port) = info.addr() {
            let link = Link::open(host, *port, info.redis_settings(), timeout).await?;
            return Ok(CommandConn::Link(link));
        }
        // No response timeout: the backend bounds every command itself, and a second timer per
        // command would cost a wake-up of the runtime's timer driver.
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(timeout))
            .set_response_timeout(None);
        let client = Client::open(info)?;
        let conn = client
            .get_multiplexed_async_connection_with_config(&config)
            .await?;
        Ok(CommandConn::Multiplexed(conn))
    }

    /// Send `cmd` and wait for its answer (a server's error answer is a value).
    pub(crate) async fn query(&self, cmd: &Cmd) -> RedisResult<Value> {
        match self {
            CommandConn::Link(link) => link.query(cmd).await,
            CommandConn::Multiplexed(conn) => conn.clone().req_packed_command(cmd).await,
        }
    }
}

impl ConnectionLike for CommandConn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            CommandConn::Link(link) => link.req_packed_command(cmd),
            CommandConn::Multiplexed(conn) => conn.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            CommandConn::Link(link) => link.req_packed_commands(pipeline, offset, count),
            CommandConn::Multiplexed(conn) => conn.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            CommandConn::Link(link) => link.get_db(),
            CommandConn::Multiplexed(conn) => conn.get_db(),
        }
    }
}
