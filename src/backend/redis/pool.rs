//! The command pool: a bb8 pool of a few connections (`command_conn.rs`). Each slot (one by
//! default) keeps one connection checked out, with a batcher that batches its commands when it is
//! busy; a command picks its slot by lock, so any number of commands share the connections in
//! flight (pipelined), commands on one lock stay on one connection, and the hot path takes no
//! checkout (no PING, no timer). A connection that failed is marked broken (a command on it failed,
//! or a link found the server closed it): the next command on its slot gives it back (bb8 then
//! drops it) and checks out another, before it is sent. bb8 opens connections in a task
//! of its own and gives a failure to its error sink, not to the caller, who would wait out the
//! whole connection timeout and learn nothing; so when the pool must open a connection, the call
//! opens it (a refusal is its error, at once) and adds it to the pool. A pool of the user's
//! (bb8-redis) is driven the same way (a call it keeps waiting while it has room opens a connection
//! itself), and otherwise used as its owner configured it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::RedisError;

use super::batcher::CommandBatcher;
pub(crate) use super::connector::Connector;
use super::link::Link;
use super::packed::Packed;
use crate::error::BoxError;

/// The pool type users may pass to [`crate::LockManagerBuilder::redis_pool`].
pub type RedisPool = bb8::Pool<bb8_redis::RedisConnectionManager>;

/// Marks its connection broken when the command it carried failed at the connection level.
pub(crate) struct BrokenFlag(Option<Arc<AtomicBool>>);

impl BrokenFlag {
    pub(crate) fn check(&self, err: &RedisError) {
        // READONLY: the server is a replica now (a failover demoted it): the next connection
        // goes to whatever server is the master then.
        let dead = err.is_io_error()
            || err.is_connection_dropped()
            || err.is_unrecoverable_error()
            || err.is_timeout()
            || err.code() == Some("READONLY");
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
    /// A Redis Cluster: redis-rs routes each command by the slot of its first key, and follows
    /// `MOVED` and `ASK`.
    #[cfg(feature = "cluster")]
    Cluster(redis::cluster_async::ClusterConnection),
}

impl Channel {
    /// Send `cmd` and wait for its reply.
    pub(crate) async fn query(&mut self, cmd: &redis::Cmd) -> redis::RedisResult<redis::Value> {
        use redis::aio::ConnectionLike;
        match self {
            Channel::Batched(batcher) => batcher.send(cmd).await,
            Channel::Direct(conn) => conn.req_packed_command(cmd).await,
            #[cfg(feature = "cluster")]
            Channel::Cluster(conn) => conn.req_packed_command(cmd).await,
        }
    }

    /// Send `packed`, one command, and wait for its reply.
    pub(crate) async fn query_packed(
        &mut self,
        packed: &Packed,
    ) -> redis::RedisResult<redis::Value> {
        match self {
            Channel::Batched(batcher) => batcher.send_packed(packed).await,
            _ => self.query(&packed.cmds()[0]).await,
        }
    }

    /// Send the commands of `packed` in one write, and read their answers (a server's error
    /// answer is a value).
    pub(crate) async fn query_packed_all(
        &mut self,
        packed: &Packed,
    ) -> redis::RedisResult<Vec<redis::Value>> {
        use redis::aio::ConnectionLike;
        let pipe = || packed.pipeline();
        match self {
            Channel::Batched(batcher) => batcher.send_packed_all(packed).await,
            Channel::Direct(conn) => conn.req_packed_commands(&pipe(), 0, packed.len()).await,
            #[cfg(feature = "cluster")]
            Channel::Cluster(conn) => conn.req_packed_commands(&pipe(), 0, packed.len()).await,
        }
    }

    /// Send the commands of `pipe` in one write, and read their answers. They go on the
    /// connection itself: the batcher would send them one by one.
    pub(crate) async fn pipeline<T: redis::FromRedisValue>(
        &mut self,
        pipe: &redis::Pipeline,
    ) -> redis::RedisResult<T> {
        match self {
            Channel::Batched(batcher) => pipe.query_async(&mut batcher.connection()).await,
            Channel::Direct(conn) => pipe.query_async(conn).await,
            // the plain path is not taken on a cluster
            #[cfg(feature = "cluster")]
            Channel::Cluster(conn) => pipe.query_async(conn).await,
        }
    }

    /// Load `script` into the server (it lost it: restarted, or its script cache was flushed).
    pub(crate) async fn load(&mut self, script: &redis::Script) -> redis::RedisResult<()> {
        match self {
            Channel::Batched(batcher) => script.load_async(&mut batcher.connection()).await,
            Channel::Direct(conn) => script.load_async(conn).await,
            // loaded on every node (redis-rs sends SCRIPT LOAD to all of them)
            #[cfg(feature = "cluster")]
            Channel::Cluster(conn) => script.load_async(conn).await,
        }
        .map(drop)
    }
}

/// One slot: the connection its commands go on, once checked out.
type Slot = Mutex<Option<bb8::PooledConnection<'static, Connector>>>;

/// Opening a slot's connection: one caller at a time opens it, the others wait for that one
/// (many requests on a broken slot open one connection, not one each).
type Opening = tokio::sync::Mutex<()>;

/// Where commands go: the crate's own connections, or a user's bb8 pool.
#[derive(Debug)]
pub(crate) enum CommandPool {
    /// Ours: a bb8 pool with one connection per slot.
    Own {
        pool: bb8::Pool<Connector>,
        slots: Box<[Slot]>,
        opening: Box<[Opening]>,
    },
    /// The user's.
    User(RedisPool),
    /// A Redis Cluster's nodes, through one redis-rs cluster connection.
    #[cfg(feature = "cluster")]
    Cluster(ClusterCommands),
}

/// The redis-rs connection to a cluster's nodes (which has no `Debug` of its own).
#[cfg(feature = "cluster")]
pub(crate) struct ClusterCommands(pub(crate) redis::cluster_async::ClusterConnection);

#[cfg(feature = "cluster")]
impl std::fmt::Debug for ClusterCommands {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ClusterCommands")
    }
}

impl CommandPool {
    /// A pool of `size` connections opened by `connector`, each within `timeout`.
    pub(crate) fn own(connector: Connector, size: u32, timeout: Duration) -> Self {
        let size = size.max(1);
        let pool = bb8::Pool::builder()
            .max_size(size)
            .min_idle(None)
            // the broken flag says which connection died: no PING on check-out
            .test_on_check_out(false)
            .retry_connection(false)
            .connection_timeout(timeout)
            .build_unchecked(connector);
        CommandPool::Own {
            pool,
            slots: (0..size).map(|_| Mutex::new(None)).collect(),
            opening: (0..size).map(|_| Opening::new(())).collect(),
        }
    }

    pub(crate) fn user(pool: RedisPool) -> Self {
        CommandPool::User(pool)
    }

    /// Open every connection of a pool of our own, each within `timeout`. Opened on their first
    /// commands instead, a burst of requests just after the manager starts would wait, all but
    /// one, for a connection that logs in and loads the scripts on a runtime the burst itself
    /// keeps busy, and within their command timeout. A connection that does not open now opens
    /// on its first command, as one that broke does.
    pub(crate) async fn open_all(&self, timeout: Duration) {
        let CommandPool::Own { slots, .. } = self else {
            return;
        };
        let hints = 0..slots.len() as u64;
        let opening = hints.map(|hint| tokio::time::timeout(timeout, self.conn(hint)));
        for outcome in futures_util::future::join_all(opening).await {
            match outcome {
                Ok(Ok(_)) => {}
                Ok(Err(err)) => tracing::debug!(error = %err, "a command connection did not open"),
                Err(_) => tracing::debug!(?timeout, "a command connection did not open in time"),
            }
        }
    }

    /// Where to send the commands of the lock that hashes to `hint`, and the flag to mark its
    /// connection broken.
    pub(crate) async fn conn(&self, hint: u64) -> Result<(Channel, BrokenFlag), BoxError> {
        let (pool, slots, opening) = match self {
            CommandPool::Own {
                pool,
                slots,
                opening,
            } => (pool, slots, opening),
            CommandPool::User(pool) => {
                // boxed, as the opening of a connection below: bb8's check-out inline would make
                // the future of every command call several times larger (one allocation per
                // command for a user's pool, against a move of kilobytes for every call)
                let pooled = Box::pin(check_out_probing(pool)).await?;
                return Ok((Channel::Direct(pooled.clone()), BrokenFlag(None)));
            }
            #[cfg(feature = "cluster")]
            CommandPool::Cluster(ClusterCommands(conn)) => {
                return Ok((Channel::Cluster(conn.clone()), BrokenFlag(None)));
            }
        };
        let index = (hint % slots.len() as u64) as usize;
        let slot = &slots[index];
        if let Some(found) = in_use(slot) {
            return Ok(found);
        }
        let _opening = opening[index].lock().await;
        // opened meanwhile by the caller we waited for
        if let Some(found) = in_use(slot) {
            return Ok(found);
        }
        // Given back first, so that the pool has room for the fresh one. Commands still on it
        // keep it open until they are answered.
        drop(lock(slot).take());
        // rare, and boxed: it connects and loads the scripts
        let fresh = Box::pin(check_out(pool)).await?;
        let found = (
            Channel::Batched(fresh.batcher.clone()),
            BrokenFlag(Some(fresh.broken.clone())),
        );
        *lock(slot) = Some(fresh);
        Ok(found)
    }

    /// The link that carries the commands of the lock that hashes to `hint`, with the flag to
    /// mark it broken, when it is open now; `None` for a connection still to open, redis-rs's
    /// (TLS, a Unix socket), a user's pool and a cluster.
    pub(crate) fn open_link(&self, hint: u64) -> Option<(Link, BrokenFlag)> {
        let CommandPool::Own { slots, .. } = self else {
            return None;
        };
        let slot = lock(&slots[(hint % slots.len() as u64) as usize]);
        let conn = slot.as_ref()?;
        if conn.is_broken() {
            return None;
        }
        let link = conn.batcher.link()?.clone();
        Some((link, BrokenFlag(Some(conn.broken.clone()))))
    }
}

fn lock(
    slot: &Slot,
) -> std::sync::MutexGuard<'_, Option<bb8::PooledConnection<'static, Connector>>> {
    slot.lock().unwrap_or_else(|p| p.into_inner())
}

fn in_use(slot: &Slot) -> Option<(Channel, BrokenFlag)> {
    let guard = lock(slot);
    let conn = guard.as_ref()?;
    if conn.is_broken() {
        return None;
    }
    Some((
        Channel::Batched(conn.batcher.clone()),
        BrokenFlag(Some(conn.broken.clone())),
    ))
}

/// A connection checked out of `pool`. When the pool has no idle connection and room for one
/// more, the call opens it (the pool's `dedicated_connection`) and adds it: bb8 would open it in a
/// task of its own, and a failure would never reach the caller.
async fn check_out<M>(pool: &bb8::Pool<M>) -> Result<bb8::PooledConnection<'static, M>, BoxError>
where
    M: bb8::ManageConnection<Error = RedisError>,
{
    let state = pool.state();
    if state.idle_connections == 0 && state.connections < pool.config().max_size {
        let fresh = pool.dedicated_connection().await?;
        // full meanwhile: the connection is dropped, and the pool serves the call
        let _ = pool.add(fresh);
    }
    pool.get_owned().await.map_err(run_error)
}

/// How long a call waits for a user's pool before it asks Redis itself whether it takes
/// connections at all.
const PROBE_AFTER: Duration = Duration::from_millis(50);

/// [`check_out`] from a user's pool, which may keep the call waiting for connections it retries in
/// a task of its own (bb8's `retry_connection`, for its whole connection timeout): one that found
/// its idle connection dead, say. Every [`PROBE_AFTER`] while it waits, if the pool has room for a
/// connection, the call opens one itself: a refusal is its error, at once; a connection is added to
/// the pool while the call keeps waiting for its turn. A full pool is busy, not broken: its
/// connections come back as their calls end, and nothing more is opened.
async fn check_out_probing<M>(
    pool: &bb8::Pool<M>,
) -> Result<bb8::PooledConnection<'static, M>, BoxError>
where
    M: bb8::ManageConnection<Error = RedisError>,
{
    let waiting = check_out(pool);
    tokio::pin!(waiting);
    let probe = async {
        loop {
            tokio::time::sleep(PROBE_AFTER).await;
            if pool.state().connections < pool.config().max_size {
                match pool.dedicated_connection().await {
                    // full meanwhile: the connection is dropped
                    Ok(fresh) => drop(pool.add(fresh)),
                    Err(refused) => return refused,
                }
            }
        }
    };
    tokio::select! {
        biased;
        checked_out = &mut waiting => checked_out,
        refused = probe => Err(Box::new(refused)),
    }
}

fn run_error(err: bb8::RunError<RedisError>) -> BoxError {
    match err {
        bb8::RunError::User(e) => Box::new(e),
        bb8::RunError::TimedOut => "timed out waiting for a Redis connection".into(),
    }
}
