//! `LockManagerBuilder`: namespace, lease, timeouts and backend of a manager.

use std::sync::Arc;
use std::time::Duration;

use super::cohort::DEFAULT_HANDOFFS;
use super::limits::Knobs;
use super::{LockManager, Shared, Timing, DEFAULT_FAIR_EVICTION, DEFAULT_LEASE};
use crate::backend::Backend;
#[cfg(feature = "redis")]
use crate::backend::{quorum, redis};
use crate::error::LockError;

#[cfg(feature = "redis")]
mod endpoints;
mod label;
mod takeover;

pub use takeover::DEFAULT_TAKEOVER_GRACE;

#[cfg(feature = "redis")]
use endpoints::resolve_all;

pub(crate) use label::default_label;

/// How long one Redis command may take before the operation fails as unavailable.
pub const DEFAULT_COMMAND_TIMEOUT: Duration = Duration::from_secs(2);

/// Quorum managers: how long one master may take to answer before it counts as failed.
pub const DEFAULT_NODE_TIMEOUT: Duration = Duration::from_millis(250);

/// Configures a [`LockManager`]. Without a backend named, [`build`](Self::build) makes a memory manager.
/// Every Redis backend (server, Sentinel, Cluster, quorum) needs Redis 7.0 or later.
///
/// ```no_run
/// # async fn run() -> Result<(), tower_lock::LockError> {
/// use std::time::Duration;
/// use tower_lock::LockManager;
///
/// let manager = LockManager::builder()
///     .namespace("billing")
///     .lease(Duration::from_secs(30))
///     .redis("redis://127.0.0.1:6379")
///     .build()
///     .await?;
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
#[must_use]
pub struct LockManagerBuilder {
    namespace: String,
    lease: Duration,
    eviction: Duration,
    command_timeout: Duration,
    node_timeout: Duration,
    pool_size: u32,
    handoffs: u32,
    label: Option<Arc<str>>,
    /// Whether, and after how long a grace, dead holders are taken over.
    takeover: takeover::Takeover,
    target: Target,
}

#[derive(Debug)]
enum Target {
    Memory,
    #[cfg(feature = "redis")]
    Redis(redis::Endpoint),
    #[cfg(feature = "redis")]
    RedisPool(redis::RedisPool, redis::Endpoint),
    #[cfg(feature = "redis")]
    Quorum(Vec<redis::Endpoint>),
    #[cfg(feature = "redis")]
    Sentinel(Vec<redis::Endpoint>, String),
    #[cfg(feature = "cluster")]
    Cluster(Vec<redis::Endpoint>),
}

impl Default for LockManagerBuilder {
    fn default() -> Self {
        LockManagerBuilder {
            namespace: "tower-lock".to_owned(),
            lease: DEFAULT_LEASE,
            eviction: DEFAULT_FAIR_EVICTION,
            command_timeout: DEFAULT_COMMAND_TIMEOUT,
            node_timeout: DEFAULT_NODE_TIMEOUT,
            pool_size: 1,
            handoffs: DEFAULT_HANDOFFS,
            label: None,
            takeover: takeover::Takeover::Default,
            target: Target::Memory,
        }
    }
}

impl LockManagerBuilder {
    /// The prefix of every Redis key of this manager (default `tower-lock`). Managers share locks
    /// only within one namespace.
    pub fn namespace(mut self, namespace: impl Into<String>) -> Self {
        self.namespace = namespace.into();
        self
    }

    /// The watchdog lease (default 30 s): renewed every lease/3; a crashed holder's locks free
    /// themselves one lease after its last renewal. From 30 ms to
    /// [`LockOptions::MAX_LEASE`](crate::LockOptions::MAX_LEASE); [`build`](Self::build) refuses
    /// others with [`LockError::Config`].
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = lease;
        self
    }

    /// Fair locks: how long a queued waiter may go without a heartbeat before it is evicted as dead
    /// (default 5 s; live waiters heartbeat every third of it). A grant also starts with a claim
    /// lease this long, which the new holder's manager extends at its next heartbeat round (the
    /// guard counts as lost when this claim ends unextended); a grant to a waiter that just died is
    /// therefore passed on after at most this long. Give every manager of a namespace the same
    /// value: the releasing manager sets the claim, the waiting one counts on it. Bounded like
    /// [`lease`](Self::lease).
    pub fn fair_eviction(mut self, eviction: Duration) -> Self {
        self.eviction = eviction;
        self
    }

    /// How long one backend command may take (default 2 s) before the operation fails with
    /// [`LockError::Unavailable`]: a dead or frozen Redis never hangs a request for longer. Getting
    /// a connection for it (opening one loads the scripts) is bounded by the same time, so a
    /// release or a renewal takes at most twice this; an acquire attempt, this in all.
    /// `Duration::MAX` means no timeout; zero is refused at [`build`](Self::build) with
    /// [`LockError::Config`].
    pub fn command_timeout(mut self, timeout: Duration) -> Self {
        self.command_timeout = timeout;
        self
    }

    /// Lock cohorting: how many times in a row a released exclusive lock may go straight to the
    /// next request of this process waiting for it (default 8; 0 turns cohorting off).
    ///
    /// Such a hand-off happens in memory: no round trip, no script. Each gets a fencing token of
    /// its own, above the one before, and keeps the lease the watchdog renews. After this many,
    /// the lock goes back to Redis, so another process waits at most about this many holds (and a
    /// round trip) once its turn has come. Fair locks keep strict arrival order across
    /// processes: they are handed on this way only to a request that found nobody else queued in
    /// Redis when it came (a read, no script), and then without this bound, unless they opt in
    /// with [`LockOptions::cohort_order`](crate::LockOptions::cohort_order). Reads that share a
    /// read hold are bounded too, this many after the first. At most 63 (the tokens Redis
    /// reserves with each acquisition, less its own).
    pub fn local_handoffs(mut self, handoffs: u32) -> Self {
        self.handoffs = handoffs;
        self
    }

    /// Connections in the command pool (default 1); each is named `tower-lock:<manager id>` in
    /// `CLIENT LIST`, like the inbox (see [`LockManager::id`]). One connection carries every
    /// command of the process in flight at once, pipelined. The more commands share a connection,
    /// the fewer reads and writes Redis and this process make for them, so one connection is
    /// usually fastest (BENCHMARKS.md, "Many keys"). More connections spread the work of reading
    /// and writing over more tasks. [`build`](Self::build) opens them all, so that the first
    /// requests do not wait for them.
    /// Zero is raised to one; more than 1024 is refused at build with [`LockError::Config`].
    pub fn pool_size(mut self, size: u32) -> Self {
        self.pool_size = size;
        self
    }

    /// Keep locks in the Redis server at `url`: `redis://[user:password@]host:port[/db]`, or
    /// `rediss://…` for TLS (feature `tls`; add `#insecure` to accept a self-signed certificate).
    /// An invalid URL fails at [`build`](Self::build) with [`LockError::Config`]. Needs Redis
    /// 7.0 or later ([guide](crate::guide::redis#version)).
    #[cfg(feature = "redis")]
    pub fn redis(mut self, url: impl Into<String>) -> Self {
        self.target = Target::Redis(redis::Endpoint::Url(url.into()));
        self
    }

    /// Keep locks in the Redis server of a `redis::Client` you built: every connection of the
    /// manager is opened with its connection info. Use it for what a URL cannot say, such as
    /// the root certificates of a private CA (`redis::Client::build_with_tls`, feature `tls`).
    #[cfg(feature = "redis")]
    pub fn redis_client(mut self, client: ::redis::Client) -> Self {
        let info = Box::new(client.get_connection_info().clone());
        self.target = Target::Redis(redis::Endpoint::Info(info));
        self
    }

    /// Keep locks in Redis through a pool you built. `url` opens the manager's one pub/sub
    /// connection. Keep bb8's `test_on_check_out` on (its default): it is what replaces a
    /// connection that died (bb8-redis cannot tell a broken connection otherwise), at the cost of
    /// a PING per command. When the pool has to open a connection, the manager opens it itself and
    /// gives it to the pool, so that a refusal is the call's error at once, with its cause. While
    /// the pool keeps a call waiting and has room for a connection, the call opens one itself
    /// every 50 ms: bb8 may be retrying one in the background for its whole connection timeout. A
    /// full pool is left alone.
    ///
    /// The pool is used as you configured it: its connections keep the names you gave them (the
    /// manager names only the inbox `tower-lock:<id>`, see [`LockManager::id`]).
    #[cfg(feature = "redis")]
    pub fn redis_pool(mut self, pool: redis::RedisPool, url: impl Into<String>) -> Self {
        self.target = Target::RedisPool(pool, redis::Endpoint::Url(url.into()));
        self
    }

    /// Keep every lock on a majority of these independent Redis masters (RedLock; at least 3,
    /// each its own server, not replicas of one another). See [`LockManager::quorum`] for what a
    /// quorum lock guarantees, and [`node_timeout`](Self::node_timeout).
    #[cfg(feature = "redis")]
    pub fn quorum<I, S>(mut self, urls: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let urls = urls.into_iter().map(|url| redis::Endpoint::Url(url.into()));
        self.target = Target::Quorum(urls.collect());
        self
    }

    /// Keep locks in the master of the Redis service `service`, as the Sentinels at `sentinels`
    /// (`redis://host:26379`) name it. Each connection asks them for the master when it opens, so
    /// after a failover the manager's connections go to the new master: a connection still on the
    /// old one fails (READONLY, or closed) and is opened again. Connections to the master use the
    /// credentials and database of the first Sentinel URL.
    ///
    /// Replication is asynchronous: a failover to a replica that had not received the latest
    /// grants forgets them, as a restart without persistence would (see
    /// [the failover window](crate::guide::redis#the-failover-window)). Every holder whose lock was forgotten learns it at its next renewal.
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), tower_lock::LockError> {
    /// use tower_lock::LockManager;
    ///
    /// let manager = LockManager::builder()
    ///     .sentinel(["redis://10.0.0.1:26379", "redis://10.0.0.2:26379"], "mymaster")
    ///     .build()
    ///     .await?;
    /// # Ok(())
    /// # }
    /// ```
    #[cfg(feature = "redis")]
    pub fn sentinel<I, S>(mut self, sentinels: I, service: impl Into<String>) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let sentinels = sentinels
            .into_iter()
            .map(|url| redis::Endpoint::Url(url.into()));
        self.target = Target::Sentinel(sentinels.collect(), service.into());
        self
    }

    /// Keep locks in the Redis Cluster that `seeds` (`redis://host:port` of some of its nodes)
    /// belong to. Each lock's keys share one hash tag, so every script call goes to the one shard
    /// that owns the lock's slot (redis-rs follows `MOVED` and `ASK`), and messages go over
    /// sharded pub/sub (`SSUBSCRIBE`, Redis 7) on that shard only: no broadcast to every node.
    ///
    /// Replication is asynchronous: a failover to a replica that had not received the latest
    /// grants forgets them (see [the failover window](crate::guide::redis#the-failover-window)). Every holder whose lock was
    /// forgotten learns it at its next renewal.
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), tower_lock::LockError> {
    /// use tower_lock::LockManager;
    ///
    /// let manager = LockManager::builder()
    ///     .cluster(["redis://10.0.0.1:7000", "redis://10.0.0.2:7000"])
    ///     .build()
    ///     .await?;
    /// # Ok(())
    /// # }
    /// ```
    #[cfg(feature = "cluster")]
    pub fn cluster<I, S>(mut self, seeds: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let seeds = seeds
            .into_iter()
            .map(|url| redis::Endpoint::Url(url.into()));
        self.target = Target::Cluster(seeds.collect());
        self
    }

    /// Quorum managers: how long one master may take to answer a command (default 250 ms) before
    /// it counts as failed (its connection is then replaced, and opening one is bounded by this
    /// too). Keep it well under the lease. An attempt never waits for a slow master once the others
    /// decided it; the command timeout then only bounds subscribing the masters' inboxes.
    pub fn node_timeout(mut self, timeout: Duration) -> Self {
        self.node_timeout = timeout;
        self
    }

    /// Build the manager. For Redis, connects the inbox (the one pub/sub connection) and fails with
    /// [`LockError::Unavailable`] if the server cannot be reached.
    pub async fn build(self) -> Result<LockManager, LockError> {
        self.validate()?;
        self.check_takeover()?;
        let (wiring, queue) = self.wiring();
        let (backend, inbox_stop) = match self.target {
            Target::Memory => return Ok(LockManager::memory_with(self.timing())),
            #[cfg(feature = "redis")]
            Target::Redis(ref server) => {
                let info = server.resolve()?;
                let (redis, stop) =
                    redis::connect(info.into(), None, &self.settings(), &wiring).await?;
                (Backend::Redis(redis), stop)
            }
            #[cfg(feature = "redis")]
            Target::RedisPool(ref pool, ref server) => {
                let (info, pool) = (server.resolve()?, Some(pool.clone()));
                let (redis, stop) =
                    redis::connect(info.into(), pool, &self.settings(), &wiring).await?;
                (Backend::Redis(redis), stop)
            }
            #[cfg(feature = "redis")]
            Target::Sentinel(ref sentinels, ref service) => {
                let infos = resolve_all(sentinels)?;
                let master = redis::Locator::sentinel(infos, service)?;
                let (redis, stop) = redis::connect(master, None, &self.settings(), &wiring).await?;
                (Backend::Redis(redis), stop)
            }
            #[cfg(feature = "cluster")]
            Target::Cluster(ref seeds) => {
                let (infos, settings) = (resolve_all(seeds)?, self.settings());
                let (redis, stop) =
                    redis::RedisBackend::connect_cluster(infos, &settings, &wiring).await?;
                (Backend::Redis(redis), stop)
            }
            #[cfg(feature = "redis")]
            Target::Quorum(ref masters) => {
                let infos = resolve_all(masters)?;
                self.validate_quorum(&infos)?;
                let settings = self.settings();
                let (quorum, stop) =
                    quorum::connect(&infos, self.node_timeout, &settings, &wiring).await?;
                (Backend::Quorum(quorum), stop)
            }
        };
        let timing = self.timing();
        let shared = Shared::new(Arc::new(backend), wiring, queue, timing, Some(inbox_stop));
        let manager = LockManager::from_shared(shared);
        manager.shared.start();
        Ok(manager)
    }

    fn validate(&self) -> Result<(), LockError> {
        let knobs = Knobs {
            namespace: &self.namespace,
            lease: self.lease,
            eviction: self.eviction,
            command_timeout: self.command_timeout,
            node_timeout: self.node_timeout,
            pool_size: self.pool_size,
            handoffs: self.handoffs,
        };
        knobs.check()
    }

    fn timing(&self) -> Timing {
        Timing {
            lease: self.lease,
            eviction: self.eviction,
            handoffs: self.handoffs,
            label: self.label.clone().unwrap_or_else(label::default_label),
        }
    }

    #[cfg(feature = "redis")]
    fn settings(&self) -> redis::Settings {
        redis::Settings {
            namespace: self.namespace.clone(),
            command_timeout: self.command_timeout,
            eviction: self.eviction,
            pool_size: self.pool_size,
        }
    }
}
