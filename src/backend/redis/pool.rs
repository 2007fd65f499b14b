//! The command pool: bb8 over multiplexed connections. Each slot (one by default) keeps one
//! connection checked out of bb8, with an outbox that batches its commands when it is busy; a
//! command picks its slot by lock, so any number of commands share the connections in flight
//! (pipelined), commands on one lock stay on one connection, and the hot path takes no bb8
//! checkout (no PING, no timer). A connection that failed is marked broken: its slot gives it back
//! to bb8, which discards it, and checks out a fresh one.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, Client, RedisError};

use super::outbox::Outbox;
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
        // No response timeout here: the backend bounds every command itself, and a second timer
        // per command would cost a wake-up of the runtime's timer driver.
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(timeout))
            .set_response_timeout(None);
        Connector { client, config }
    }
}

/// A pooled connection, its outbox and its broken flag, shared with the calls in flight.
#[derive(Clone)]
pub(crate) struct Tracked {
    conn: MultiplexedConnection,
    outbox: Arc<Outbox>,
    broken: Arc<AtomicBool>,
}

impl bb8::ManageConnection for Connector {
    type Connection = Tracked;
    type Error = RedisError;

    async fn connect(&self) -> Result<Tracked, RedisError> {
        let mut conn = self
            .client
            .get_multiplexed_async_connection_with_config(&self.config)
            .await?;
        // Load every script in one round trip: a fresh connection often means a fresh server (a
        // restart empties the script cache), and NOSCRIPT would cost each script's first call two
        // more round trips.
        let mut load = redis::pipe();
        for source in super::scripts::ALL.iter() {
            load.cmd("SCRIPT").arg("LOAD").arg(source).ignore();
        }
        load.query_async::<()>(&mut conn).await?;
        Ok(Tracked {
            outbox: Arc::new(Outbox::new(conn.clone())),
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

/// How a command reaches Redis: through the outbox of one of our connections, or straight on a
/// connection of a pool the user built (used as its owner configured it).
pub(crate) enum Channel {
    Batched(Arc<Outbox>),
    Direct(MultiplexedConnection),
}

impl Channel {
    /// Send `cmd` and wait for its reply.
    pub(crate) async fn query(&mut self, cmd: &redis::Cmd) -> redis::RedisResult<redis::Value> {
        use redis::aio::ConnectionLike;
        match self {
            Channel::Batched(outbox) => outbox.send(cmd).await,
            Channel::Direct(conn) => conn.req_packed_command(cmd).await,
        }
    }

    /// Load `script` into the server (it lost it: restarted, or its script cache was flushed).
    pub(crate) async fn load(&mut self, script: &redis::Script) -> redis::RedisResult<()> {
        let mut conn = match self {
            Channel::Batched(outbox) => outbox.connection(),
            Channel::Direct(conn) => conn.clone(),
        };
        script.load_async(&mut conn).await.map(drop)
    }
}

/// Where connections come from: our own bb8 pool, or one the user built.
#[derive(Debug)]
enum Source {
    Own(bb8::Pool<Connector>),
    User(RedisPool),
}

type Slot = Mutex<Option<bb8::PooledConnection<'static, Connector>>>;

/// The connections commands are sent on.
#[derive(Debug)]
pub(crate) struct CommandPool {
    source: Source,
    /// Connections kept checked out of our own pool (empty for a user's pool, which is used as its
    /// owner configured it).
    slots: Box<[Slot]>,
}

impl std::fmt::Debug for Tracked {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tracked").finish_non_exhaustive()
    }
}

impl CommandPool {
    pub(crate) fn own(connector: Connector, size: u32, timeout: Duration) -> Self {
        let size = size.max(1);
        let pool = bb8::Pool::builder()
            // room for every slot plus replacements being opened
            .max_size(size * 2)
            .test_on_check_out(false)
            .connection_timeout(timeout)
            .retry_connection(false)
            .build_unchecked(connector);
        CommandPool {
            source: Source::Own(pool),
            slots: (0..size).map(|_| Mutex::new(None)).collect(),
        }
    }

    pub(crate) fn user(pool: RedisPool) -> Self {
        CommandPool {
            source: Source::User(pool),
            slots: Box::new([]),
        }
    }

    /// Where to send the commands of the lock that hashes to `hint`, and the flag to mark its
    /// connection broken.
    pub(crate) async fn conn(&self, hint: u64) -> Result<(Channel, BrokenFlag), BoxError> {
        let pool = match &self.source {
            Source::Own(pool) => pool,
            Source::User(pool) => {
                let pooled = pool.get().await.map_err(run_error)?;
                return Ok((Channel::Direct(pooled.clone()), BrokenFlag(None)));
            }
        };
        let slot = &self.slots[(hint % self.slots.len() as u64) as usize];
        if let Some(found) = checked_out(slot) {
            return Ok(found);
        }
        let pooled = pool.get_owned().await.map_err(run_error)?;
        let found = (
            Channel::Batched(pooled.outbox.clone()),
            BrokenFlag(Some(pooled.broken.clone())),
        );
        // Replacing a broken connection returns it to bb8, which discards it (`has_broken`).
        *lock(slot) = Some(pooled);
        Ok(found)
    }
}

fn lock(
    slot: &Slot,
) -> std::sync::MutexGuard<'_, Option<bb8::PooledConnection<'static, Connector>>> {
    slot.lock().unwrap_or_else(|p| p.into_inner())
}

fn checked_out(slot: &Slot) -> Option<(Channel, BrokenFlag)> {
    let guard = lock(slot);
    let pooled = guard.as_ref()?;
    if pooled.broken.load(Ordering::Relaxed) {
        return None;
    }
    Some((
        Channel::Batched(pooled.outbox.clone()),
        BrokenFlag(Some(pooled.broken.clone())),
    ))
}

fn run_error(err: bb8::RunError<RedisError>) -> BoxError {
    match err {
        bb8::RunError::User(e) => Box::new(e),
        bb8::RunError::TimedOut => "timed out waiting for a Redis connection".into(),
    }
}
