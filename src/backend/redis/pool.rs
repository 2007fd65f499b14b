//! The command pool: bb8 over multiplexed connections. A checked-out connection is cloned and given
//! back at once, so any number of commands share the pool's connections in flight (pipelined), and
//! checkout costs no PING. A connection that failed is marked broken and bb8 replaces it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, Client, RedisError};

use crate::error::BoxError;

/// The pool type users may pass to [`crate::LockManagerBuilder::redis_pool`].
pub type RedisPool = bb8::Pool<bb8_redis::RedisConnectionManager>;

/// Opens the pool's connections with our timeouts.
#[derive(Debug, Clone)]
pub(crate) struct Connector {
    client: Client,
    config: AsyncConnectionConfig,
}

impl Connector {
    pub(crate) fn new(client: Client, timeout: Duration) -> Self {
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(timeout))
            .set_response_timeout(Some(timeout));
        Connector { client, config }
    }
}

/// A pooled connection and its broken flag, shared with the clones in flight.
#[derive(Clone)]
pub(crate) struct Tracked {
    conn: MultiplexedConnection,
    broken: Arc<AtomicBool>,
}

impl bb8::ManageConnection for Connector {
    type Connection = Tracked;
    type Error = RedisError;

    async fn connect(&self) -> Result<Tracked, RedisError> {
        let conn = self
            .client
            .get_multiplexed_async_connection_with_config(&self.config)
            .await?;
        Ok(Tracked {
            conn,
            broken: Arc::new(AtomicBool::new(false)),
        })
    }

    async fn is_valid(&self, conn: &mut Tracked) -> Result<(), RedisError> {
        redis::cmd("PING").query_async::<()>(&mut conn.conn).await
    }

    fn has_broken(&self, conn: &mut Tracked) -> bool {
        conn.broken.load(Ordering::Relaxed)
    }
}

/// Marks its connection broken when the command it carried failed at the connection level.
pub(crate) struct BrokenFlag(Option<Arc<AtomicBool>>);

impl BrokenFlag {
    pub(crate) fn check(&self, err: &RedisError) {
        let dead = err.is_io_error()
            || err.is_connection_dropped()
            || err.is_unrecoverable_error()
            || err.is_timeout();
        if let (true, Some(flag)) = (dead, &self.0) {
            flag.store(true, Ordering::Relaxed);
        }
    }

    /// A command timed out on the client side: the connection may be stuck.
    pub(crate) fn timed_out(&self) {
        if let Some(flag) = &self.0 {
            flag.store(true, Ordering::Relaxed);
        }
    }
}

/// Our own pool, or one the user built.
#[derive(Debug)]
pub(crate) enum CommandPool {
    Own(bb8::Pool<Connector>),
    User(RedisPool),
}

impl std::fmt::Debug for Tracked {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tracked").finish_non_exhaustive()
    }
}

impl CommandPool {
    pub(crate) fn own(connector: Connector, size: u32, timeout: Duration) -> Self {
        let pool = bb8::Pool::builder()
            .max_size(size.max(1))
            .test_on_check_out(false)
            .connection_timeout(timeout)
            .retry_connection(false)
            .build_unchecked(connector);
        CommandPool::Own(pool)
    }

    /// A connection to send on, and the flag to mark it broken.
    pub(crate) async fn conn(&self) -> Result<(MultiplexedConnection, BrokenFlag), BoxError> {
        match self {
            CommandPool::Own(pool) => loop {
                let pooled = pool.get().await.map_err(run_error)?;
                // bb8 looks at `has_broken` when a connection comes back: returning this one
                // discards it, and the next `get` opens a fresh one.
                if pooled.broken.load(Ordering::Relaxed) {
                    continue;
                }
                return Ok((pooled.conn.clone(), BrokenFlag(Some(pooled.broken.clone()))));
            },
            CommandPool::User(pool) => {
                let pooled = pool.get().await.map_err(run_error)?;
                Ok((pooled.clone(), BrokenFlag(None)))
            }
        }
    }
}

fn run_error(err: bb8::RunError<RedisError>) -> BoxError {
    match err {
        bb8::RunError::User(e) => Box::new(e),
        bb8::RunError::TimedOut => "timed out waiting for a Redis connection".into(),
    }
}
