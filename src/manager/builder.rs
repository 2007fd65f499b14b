//! `LockManagerBuilder`: namespace, lease, timeouts and backend of a manager.

use std::sync::Arc;
use std::time::Duration;

use super::{new_manager_id, LockManager, Shared, Timing, DEFAULT_FAIR_EVICTION, DEFAULT_LEASE};
use crate::error::LockError;

/// How long one Redis command may take before the operation fails as unavailable.
pub const DEFAULT_COMMAND_TIMEOUT: Duration = Duration::from_secs(2);

/// Quorum managers: how long one master may take to answer before it counts as failed.
pub const DEFAULT_NODE_TIMEOUT: Duration = Duration::from_millis(250);

/// Configures a [`LockManager`]. Without a backend named, [`build`](Self::build) makes a memory manager.
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
    target: Target,
}

#[derive(Debug)]
enum Target {
    Memory,
    #[cfg(feature = "redis")]
    RedisUrl(String),
    #[cfg(feature = "redis")]
    RedisPool(crate::backend::redis::RedisPool, String),
    #[cfg(feature = "redis")]
    Quorum(Vec<String>),
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
    /// themselves one lease after its last renewal.
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = lease;
        self
    }

    /// Fair locks: how long a queued waiter may go without a heartbeat before it is evicted as dead
    /// (default 5 s; live waiters heartbeat every third of it). A grant also starts with a claim
    /// lease this long, which the new holder's manager extends at its next heartbeat round (the
    /// guard counts as lost when this claim ends unextended); a grant to a waiter that just died is
    /// therefore passed on after at most this long. Give every manager of a namespace the same
    /// value: the releasing manager sets the claim, the waiting one counts on it.
    pub fn fair_eviction(mut self, eviction: Duration) -> Self {
        self.eviction = eviction;
        self
    }

    /// How long one backend command may take (default 2 s) before the operation fails with
    /// [`LockError::Unavailable`]: a dead or frozen Redis never hangs a request for longer. Getting
    /// a connection for it (opening one loads the scripts) is bounded by the same time, so a
    /// release or a renewal takes at most twice this; an acquire attempt, this in all.
    pub fn command_timeout(mut self, timeout: Duration) -> Self {
        self.command_timeout = timeout;
        self
    }

    /// Connections in the command pool (default 1). One multiplexed connection carries every
    /// command of the process in flight at once (pipelined), and the more commands share a
    /// connection, the fewer reads and writes Redis and this process make for them: on a 2-core
    /// machine, 1 connection served more acquisitions a second over many keys than 4 in each of 8
    /// alternating runs (and than 2 in each of 3), with less CPU per acquisition on both sides
    /// (BENCHMARKS.md). More connections spread the work of reading and writing over more tasks.
    pub fn pool_size(mut self, size: u32) -> Self {
        self.pool_size = size;
        self
    }

    /// Keep locks in the Redis server at `url` (`redis://host:port/db`).
    #[cfg(feature = "redis")]
    pub fn redis(mut self, url: impl Into<String>) -> Self {
        self.target = Target::RedisUrl(url.into());
        self
    }

    /// Keep locks in Redis through a pool you built. `url` opens the manager's one pub/sub
    /// connection. A pool built with `test_on_check_out(false)` saves a PING per command.
    #[cfg(feature = "redis")]
    pub fn redis_pool(
        mut self,
        pool: crate::backend::redis::RedisPool,
        url: impl Into<String>,
    ) -> Self {
        self.target = Target::RedisPool(pool, url.into());
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
        self.target = Target::Quorum(urls.into_iter().map(Into::into).collect());
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
        if self.lease < Duration::from_millis(30) {
            return Err(LockError::Config(format!(
                "lease {:?} is too short (at least 30 ms)",
                self.lease
            )));
        }
        if self.eviction < Duration::from_millis(30) {
            return Err(LockError::Config(format!(
                "fair eviction {:?} is too short (at least 30 ms)",
                self.eviction
            )));
        }
        if self.namespace.is_empty() {
            return Err(LockError::Config("namespace is empty".to_owned()));
        }
        match self.target {
            Target::Memory => Ok(LockManager::memory_with(self.timing())),
            #[cfg(feature = "redis")]
            Target::RedisUrl(ref url) => {
                let client = open(url)?;
                let connector =
                    crate::backend::redis::Connector::new(client.clone(), self.command_timeout);
                let pool = crate::backend::redis::CommandPool::own(
                    connector,
                    self.pool_size,
                    self.command_timeout,
                );
                self.build_redis(client, pool).await
            }
            #[cfg(feature = "redis")]
            Target::RedisPool(ref pool, ref url) => {
                let client = open(url)?;
                let pool = crate::backend::redis::CommandPool::user(pool.clone());
                self.build_redis(client, pool).await
            }
            #[cfg(feature = "redis")]
            Target::Quorum(ref urls) => self.build_quorum(urls).await,
        }
    }

    fn timing(&self) -> Timing {
        Timing {
            lease: self.lease,
            eviction: self.eviction,
        }
    }

    #[cfg(feature = "redis")]
    async fn build_redis(
        &self,
        client: redis::Client,
        pool: crate::backend::redis::CommandPool,
    ) -> Result<LockManager, LockError> {
        use crate::backend::redis::{Inbox, KeySpace, RedisBackend};
        use crate::backend::Backend;
        use crate::waiters::WaitRegistry;

        let id = new_manager_id();
        let keys = KeySpace::new(&self.namespace);
        let waiters = Arc::new(WaitRegistry::default());
        let inbox = Inbox::new(
            &client,
            keys.inbox(&id),
            self.command_timeout,
            waiters.clone(),
        )?;
        let subscription = inbox
            .subscribe()
            .await
            .map_err(|err| LockError::unavailable("", err))?;
        let redis = Arc::new(RedisBackend::new(
            pool,
            keys,
            id.clone(),
            self.command_timeout,
            self.eviction,
        ));
        let backend = Arc::new(Backend::Redis(redis.clone()));
        let (stop, stopped) = tokio::sync::oneshot::channel();
        let (shared, chores) = Shared::new(backend, waiters.clone(), self.timing(), id, Some(stop));
        let recheck = shared.recheck.clone();
        spawn_inbox(
            inbox,
            Some(subscription),
            redis,
            waiters,
            chores,
            recheck,
            stopped,
        );
        let manager = LockManager::from_shared(shared);
        manager.shared.start();
        Ok(manager)
    }

    /// A quorum manager: per master, a command pool (commands bounded by the node timeout) and an
    /// inbox; one wait registry and one watchdog for all. Builds when a majority of the masters can
    /// be subscribed; the inboxes of the others keep trying in the background.
    #[cfg(feature = "redis")]
    async fn build_quorum(&self, urls: &[String]) -> Result<LockManager, LockError> {
        use crate::backend::quorum::{Node, QuorumBackend};
        use crate::backend::redis::{CommandPool, Connector, Inbox, KeySpace, RedisBackend};
        use crate::backend::Backend;
        use crate::waiters::WaitRegistry;

        if urls.len() < 3 {
            return Err(LockError::Config(format!(
                "a quorum needs at least 3 independent Redis masters, got {}",
                urls.len()
            )));
        }
        if let Some(dup) = urls
            .iter()
            .enumerate()
            .find(|(i, u)| urls[..*i].contains(u))
        {
            return Err(LockError::Config(format!(
                "Redis master {} is listed twice: a quorum needs independent masters",
                dup.1
            )));
        }
        if self.node_timeout.is_zero() {
            return Err(LockError::Config("node timeout is zero".to_owned()));
        }
        let id = new_manager_id();
        let keys = KeySpace::new(&self.namespace);
        let waiters = Arc::new(WaitRegistry::default());
        let mut nodes = Vec::with_capacity(urls.len());
        let mut inboxes = Vec::with_capacity(urls.len());
        for url in urls {
            let client = open(url)?;
            let name = client.get_connection_info().addr().to_string();
            let connector = Connector::new(client.clone(), self.node_timeout);
            let pool = CommandPool::own(connector, self.pool_size, self.node_timeout);
            let redis = RedisBackend::new(
                pool,
                keys.clone(),
                id.clone(),
                self.node_timeout,
                self.eviction,
            );
            nodes.push(Node::new(Arc::new(redis), name));
            let inbox = Inbox::new(
                &client,
                keys.inbox(&id),
                self.command_timeout,
                waiters.clone(),
            );
            inboxes.push(inbox?);
        }
        let streams = futures_util::future::join_all(inboxes.iter().map(Inbox::subscribe)).await;
        let up = streams.iter().filter(|s| s.is_ok()).count();
        if up < urls.len() / 2 + 1 {
            let causes: Vec<String> = nodes
                .iter()
                .zip(&streams)
                .filter_map(|(node, s)| s.as_ref().err().map(|e| format!("{}: {e}", node.name)))
                .collect();
            let cause = format!(
                "only {up} of {} Redis masters reachable; a quorum needs {}: {}",
                urls.len(),
                urls.len() / 2 + 1,
                causes.join("; ")
            );
            return Err(LockError::unavailable("", cause));
        }
        let redis: Vec<Arc<RedisBackend>> = nodes.iter().map(|n| n.redis.clone()).collect();
        let quorum = Arc::new(QuorumBackend::new(
            nodes,
            id.clone(),
            keys.inbox_prefix(),
            waiters.clone(),
            self.node_timeout,
        ));
        let backend = Arc::new(Backend::Quorum(quorum.clone()));
        let (stop, stopped) = tokio::sync::oneshot::channel();
        let (shared, chores) = Shared::new(backend, waiters.clone(), self.timing(), id, Some(stop));
        quorum.finish_in(chores.clone());
        // One stop signal per inbox, all fired when the manager's is.
        let mut stops = Vec::with_capacity(redis.len());
        for ((inbox, stream), node) in inboxes.into_iter().zip(streams).zip(redis) {
            let (stop, stopped) = tokio::sync::oneshot::channel();
            stops.push(stop);
            spawn_inbox(
                inbox,
                stream.ok(),
                node,
                waiters.clone(),
                chores.clone(),
                shared.recheck.clone(),
                stopped,
            );
        }
        tokio::spawn(async move {
            let _ = stopped.await;
            drop(stops);
        });
        let manager = LockManager::from_shared(shared);
        manager.shared.start();
        Ok(manager)
    }
}

/// Run the inbox of one Redis server (subscribing first, with backoff, if `subscription` is
/// `None`) until `stopped` fires. A message no local waiter can take is passed on through that
/// server: a wake-up to the next waiting manager, a grant to the next queued waiter. After a
/// reconnection, `recheck` has the watchdog ask the server about every lease at once.
#[cfg(feature = "redis")]
fn spawn_inbox(
    inbox: crate::backend::redis::Inbox,
    subscription: Option<crate::backend::redis::Subscription>,
    node: Arc<crate::backend::redis::RedisBackend>,
    waiters: Arc<crate::waiters::WaitRegistry>,
    chores: tokio::sync::mpsc::UnboundedSender<crate::watchdog::Chore>,
    recheck: Arc<tokio::sync::Notify>,
    stopped: tokio::sync::oneshot::Receiver<()>,
) {
    use crate::backend::redis::Unclaimed;

    let unclaimed = move |message: Unclaimed| {
        let (node, waiters) = (node.clone(), waiters.clone());
        let _ = chores.send(Box::pin(async move {
            let outcome = match message {
                Unclaimed::Wake(lock) => {
                    let departure = crate::waiters::Departure {
                        last: true,
                        pass_on: true,
                    };
                    let outcome = node.abandon(&lock, departure).await;
                    // a request that began to wait meanwhile may have lost its record: it checks
                    waiters.wake_one(&lock);
                    outcome
                }
                Unclaimed::Grant { lock, waiter } => node.leave_queue(&lock, &waiter).await,
            };
            if let Err(err) = outcome {
                tracing::debug!(error = %err, "could not pass an unclaimed message on");
            }
        }));
    };
    tokio::spawn(inbox.run(subscription, unclaimed, recheck, stopped));
}

#[cfg(feature = "redis")]
fn open(url: &str) -> Result<redis::Client, LockError> {
    redis::Client::open(url).map_err(|err| LockError::Config(format!("invalid Redis URL: {err}")))
}
