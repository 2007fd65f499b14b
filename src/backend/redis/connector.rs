//! How the command pool opens its connections: with the manager's timeouts and name, and every
//! script loaded; and how bb8 tells the ones that died.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use redis::RedisError;

use super::locator::Locator;

use super::batcher::CommandBatcher;
use super::command_conn::CommandConn;

/// Opens the pool's connections with our timeouts and our name.
#[derive(Debug, Clone)]
pub(crate) struct Connector {
    /// Where each connection goes (asked again for every connection).
    server: Locator,
    /// Bounds opening a connection.
    timeout: Duration,
    /// `CLIENT SETNAME` of every connection.
    name: String,
}

impl Connector {
    pub(crate) fn new(server: Locator, timeout: Duration, name: String) -> Self {
        Connector {
            server,
            timeout,
            name,
        }
    }
}

/// A pooled connection (through its batcher) and its broken flag, shared with the calls in flight.
pub(crate) struct Tracked {
    pub(super) batcher: Arc<CommandBatcher>,
    pub(super) broken: Arc<AtomicBool>,
}

impl std::fmt::Debug for Tracked {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tracked").finish_non_exhaustive()
    }
}

impl Tracked {
    /// Whether a command on it failed at the connection level, or the connection itself failed
    /// or was closed by the server (which a link finds without a command).
    pub(super) fn is_broken(&self) -> bool {
        self.broken.load(Ordering::Relaxed) || !self.batcher.is_open()
    }
}

impl Connector {
    /// Open a connection, name it, and load every script on it. A failure names the server (and
    /// what answered there, if not Redis).
    async fn open(&self) -> Result<Tracked, RedisError> {
        match self.open_named().await {
            Ok(tracked) => Ok(tracked),
            Err(err) => Err(super::diagnose::explain(err, &self.server, self.timeout).await),
        }
    }

    async fn open_named(&self) -> Result<Tracked, RedisError> {
        let mut conn = CommandConn::open(self.server.current().await?, self.timeout).await?;
        // Load every script in one round trip: a fresh connection often means a fresh server (a
        // restart empties the script cache), and NOSCRIPT would cost each script's first call two
        // more round trips.
        let mut load = redis::pipe();
        load.cmd("CLIENT").arg("SETNAME").arg(&self.name).ignore();
        for source in super::scripts::STANDALONE.sources.iter() {
            load.cmd("SCRIPT").arg("LOAD").arg(source).ignore();
        }
        load.query_async::<()>(&mut conn).await?;
        Ok(Tracked {
            batcher: Arc::new(CommandBatcher::new(conn)),
            broken: Arc::new(AtomicBool::new(false)),
        })
    }
}

impl bb8::ManageConnection for Connector {
    type Connection = Tracked;
    type Error = RedisError;

    async fn connect(&self) -> Result<Tracked, RedisError> {
        self.open().await
    }

    /// Not called: the pool checks nothing out on trust (`test_on_check_out(false)`).
    async fn is_valid(&self, conn: &mut Tracked) -> Result<(), RedisError> {
        match conn.is_broken() {
            false => Ok(()),
            true => Err(std::io::Error::from(std::io::ErrorKind::BrokenPipe).into()),
        }
    }

    /// A command on it failed at the connection level, or the connection failed.
    fn has_broken(&self, conn: &mut Tracked) -> bool {
        conn.is_broken()
    }
}
