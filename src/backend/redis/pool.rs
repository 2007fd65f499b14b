//! The command pool: a few multiplexed connections. Each slot (one by default) keeps one
//! connection, with a batcher that batches its commands when it is busy; a command picks its slot
//! by lock, so any number of commands share the connections in flight (pipelined), commands on one
//! lock stay on one connection, and the hot path takes no checkout (no PING, no timer). A
//! connection that failed is marked broken: the next command on its slot opens a fresh one, and a
//! failure to open it is that command's error at once (a pool that connects in the background,
//! as bb8 does, keeps the error from its caller, who waits out the whole timeout). A pool of the
//! user's (bb8) is used as it is.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, Client, RedisError};

use super::batcher::CommandBatcher;
use crate::error::BoxError;

/// The pool type users may pass to [`crate::LockManagerBuilder::redis_pool`].
pub type RedisPool = bb8::Pool<bb8_redis::RedisConnectionManager>;

/// Opens the pool's connections with our timeouts and our name.
#[derive(Debug, Clone)]
pub(crate) struct Connector {
    client: Client,
    config: AsyncConnectionConfig,
    /// `CLIENT SETNAME` of every connection.
    name: String,
}

impl Connector {
    pub(crate) fn new(client: Client, timeout: Duration, name: String) -> Self {
        // No response timeout here: the backend bounds every command itself, and a second timer
        // per command would cost a wake-up of the runtime's timer driver.
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(timeout))
            .set_response_timeout(None);
        Connector {
            client,
            config,
            name,
        }
    }
}

/// A pooled connection (through its batcher) and its broken flag, shared with the calls in flight.
pub(crate) struct Tracked {
    batcher: Arc<CommandBatcher>,
    broken: Arc<AtomicBool>,
}

impl Connector {
    /// Open a connection, name it, and load every script on it.
    async fn connect(&self) -> Result<Tracked, RedisError> {
        let mut conn = self
            .client
            .get_multiplexed_async_connection_with_config(&self.config)
            .await?;
        // Load every script in one round trip: a fresh connection often means a fresh server (a
        // restart empties the script cache), and NOSCRIPT would cost each script's first call two
        // more round trips.
        let mut load = redis::pipe();
        load.cmd("CLIENT").arg("SETNAME").arg(&self.name).ignore();
        for source in super::scripts::ALL.iter() {
            load.cmd("SCRIPT").arg("LOAD").arg(source).ignore();
        }
        load.query_async::<()>(&mut conn).await?;
        Ok(Tracked {
            batcher: Arc::new(CommandBatcher::new(conn)),
            broken: Arc::new(AtomicBool::new(false)),
        })
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

/// How a command reaches Redis: through the batcher of one of our connections, or straight on a
/// connection of a pool the user built (used as its owner configured it).
pub(crate) enum Channel {
    Batched(Arc<CommandBatcher>),
    Direct(MultiplexedConnection),
}

impl Channel {
    /// Send `cmd` and wait for its reply.
    pub(crate) async fn query(&mut self, cmd: &redis::Cmd) -> redis::RedisResult<redis::Value> {
        use redis::aio::ConnectionLike;
        match self {
            Channel::Batched(batcher) => batcher.send(cmd).await,
            Channel::Direct(conn) => conn.req_packed_command(cmd).await,
        }
    }

    /// Load `script` into the server (it lost it: restarted, or its script cache was flushed).
    pub(crate) async fn load(&mut self, script: &redis::Script) -> redis::RedisResult<()> {
        let mut conn = match self {
            Channel::Batched(batcher) => batcher.connection(),
            Channel::Direct(conn) => conn.clone(),
        };
        script.load_async(&mut conn).await.map(drop)
    }
}

/// Where connections come from: our own bb8 pool, or one the user built.
#[derive(Debug)]
enum Source {
    Own(Box<Connector>),
    User(RedisPool),
}

/// One slot: the connection its commands go on, once opened.
type Slot = Mutex<Option<Tracked>>;

/// Opening a slot's connection: one caller at a time opens it, the others wait for that one
/// (many requests on a broken slot open one connection, not one each).
type Opening = tokio::sync::Mutex<()>;

/// Where commands go: the crate's own connections, or a user's bb8 pool.
#[derive(Debug)]
pub(crate) struct CommandPool {
    source: Source,
    slots: Box<[Slot]>,
    opening: Box<[Opening]>,
    /// Bounds opening a connection (scripts loaded included).
    timeout: Duration,
}

impl std::fmt::Debug for Tracked {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tracked").finish_non_exhaustive()
    }
}

impl CommandPool {
    pub(crate) fn own(connector: Connector, size: u32, timeout: Duration) -> Self {
        let size = size.max(1);
        CommandPool {
            source: Source::Own(Box::new(connector)),
            slots: (0..size).map(|_| Mutex::new(None)).collect(),
            opening: (0..size).map(|_| Opening::new(())).collect(),
            timeout,
        }
    }

    pub(crate) fn user(pool: RedisPool) -> Self {
        CommandPool {
            source: Source::User(pool),
            slots: Box::new([]),
            opening: Box::new([]),
            timeout: Duration::ZERO,
        }
    }

    /// Where to send the commands of the lock that hashes to `hint`, and the flag to mark its
    /// connection broken.
    pub(crate) async fn conn(&self, hint: u64) -> Result<(Channel, BrokenFlag), BoxError> {
        let connector = match &self.source {
            Source::Own(connector) => connector,
            Source::User(pool) => return user_conn(pool).await,
        };
        let index = (hint % self.slots.len() as u64) as usize;
        let slot = &self.slots[index];
        if let Some(found) = in_use(slot) {
            return Ok(found);
        }
        let _opening = self.opening[index].lock().await;
        // opened meanwhile by the caller we waited for
        if let Some(found) = in_use(slot) {
            return Ok(found);
        }
        let fresh = tokio::time::timeout(self.timeout, connector.connect())
            .await
            .map_err(|_| -> BoxError {
                format!("no Redis connection within {:?}", self.timeout).into()
            })??;
        let found = (
            Channel::Batched(fresh.batcher.clone()),
            BrokenFlag(Some(fresh.broken.clone())),
        );
        // A broken connection replaced here closes once the commands still on it are answered.
        *lock(slot) = Some(fresh);
        Ok(found)
    }
}

fn lock(slot: &Slot) -> std::sync::MutexGuard<'_, Option<Tracked>> {
    slot.lock().unwrap_or_else(|p| p.into_inner())
}

fn in_use(slot: &Slot) -> Option<(Channel, BrokenFlag)> {
    let guard = lock(slot);
    let conn = guard.as_ref()?;
    if conn.broken.load(Ordering::Relaxed) {
        return None;
    }
    Some((
        Channel::Batched(conn.batcher.clone()),
        BrokenFlag(Some(conn.broken.clone())),
    ))
}

/// A connection from the user's pool. bb8 opens connections in a task of its own and gives a
/// failure to its error sink, not to the caller, who would wait out the pool's whole connection
/// timeout and learn nothing. So when the pool has no idle connection and room for one more, the
/// call opens it (the pool's `dedicated_connection`: a refusal is this call's error, at once) and
/// hands it to the pool.
async fn user_conn(pool: &RedisPool) -> Result<(Channel, BrokenFlag), BoxError> {
    let state = pool.state();
    if state.idle_connections == 0 && state.connections < pool.config().max_size {
        let fresh = pool.dedicated_connection().await?;
        // full meanwhile: the connection is dropped, and the pool serves the call
        let _ = pool.add(fresh);
    }
    let pooled = pool.get().await.map_err(run_error)?;
    Ok((Channel::Direct(pooled.clone()), BrokenFlag(None)))
}

fn run_error(err: bb8::RunError<RedisError>) -> BoxError {
    match err {
        bb8::RunError::User(e) => Box::new(e),
        bb8::RunError::TimedOut => "timed out waiting for a Redis connection".into(),
    }
}
