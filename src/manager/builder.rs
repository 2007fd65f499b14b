//! `LockManagerBuilder`: namespace, lease, timeouts and backend of a manager.

use std::sync::Arc;
use std::time::Duration;

use super::{new_manager_id, LockManager, Shared, Timing, DEFAULT_FAIR_EVICTION, DEFAULT_LEASE};
use crate::error::LockError;

/// How long one Redis command may take before the operation fails as unavailable.
pub const DEFAULT_COMMAND_TIMEOUT: Duration = Duration::from_secs(2);

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
}

impl Default for LockManagerBuilder {
    fn default() -> Self {
        LockManagerBuilder {
            namespace: "tower-lock".to_owned(),
            lease: DEFAULT_LEASE,
            eviction: DEFAULT_FAIR_EVICTION,
            command_timeout: DEFAULT_COMMAND_TIMEOUT,
            pool_size: 4,
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
    /// lease this long, which the new holder's manager extends at once; a grant to a waiter that
    /// just died is therefore passed on after at most this long.
    pub fn fair_eviction(mut self, eviction: Duration) -> Self {
        self.eviction = eviction;
        self
    }

    /// How long one backend command may take (default 2 s) before the operation fails with
    /// [`LockError::Unavailable`]: a dead or frozen Redis never hangs a request for longer.
    pub fn command_timeout(mut self, timeout: Duration) -> Self {
        self.command_timeout = timeout;
        self
    }

    /// Connections in the command pool (default 4; each carries many commands in flight).
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
        use crate::backend::redis::{Inbox, KeySpace, RedisBackend, Unclaimed};
        use crate::backend::Backend;
        use crate::waiters::WaitRegistry;

        let id = new_manager_id();
        let keys = KeySpace::new(&self.namespace);
        let inbox = Inbox::new(client, keys.inbox(&id), self.command_timeout);
        let stream = inbox
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
        let backend = Arc::new(Backend::Redis(redis));
        let waiters = Arc::new(WaitRegistry::default());
        let (stop, stopped) = tokio::sync::oneshot::channel();
        let (shared, chores) = Shared::new(
            backend.clone(),
            waiters.clone(),
            self.timing(),
            id,
            Some(stop),
        );
        // A message that no local waiter could take is passed on: a wake-up to the next waiting
        // manager, a grant to the next queued waiter.
        let unclaimed = move |message: Unclaimed| {
            let backend = backend.clone();
            let _ = chores.send(Box::pin(async move {
                let outcome = match message {
                    Unclaimed::Wake(lock) => {
                        let departure = crate::waiters::Departure {
                            last: true,
                            pass_on: true,
                        };
                        backend.abandon(&lock, departure).await
                    }
                    Unclaimed::Grant { lock, owner, token } => {
                        backend.leave_queue(&lock, &owner, Some(token)).await
                    }
                };
                if let Err(err) = outcome {
                    tracing::debug!(error = %err, "could not pass an unclaimed message on");
                }
            }));
        };
        tokio::spawn(inbox.run(stream, waiters, unclaimed, stopped));
        let manager = LockManager::from_shared(shared);
        manager.shared.start();
        Ok(manager)
    }
}

#[cfg(feature = "redis")]
fn open(url: &str) -> Result<redis::Client, LockError> {
    redis::Client::open(url).map_err(|err| LockError::Config(format!("invalid Redis URL: {err}")))
}
