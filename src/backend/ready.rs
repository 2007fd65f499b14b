//! Readiness: whether the servers a manager uses answer now. Each Redis server registers itself
//! here when its inbox starts (its command connections and its inbox); a readiness probe asks
//! them all at once. A manager with no server (memory) is always ready.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use crate::error::LockError;

#[cfg(feature = "redis")]
use super::redis::{InboxLine, RedisBackend};

/// The servers of one manager, and how many of them must answer.
#[derive(Default)]
pub(crate) struct Readiness {
    #[cfg(feature = "redis")]
    servers: Mutex<Vec<Arc<ServerCheck>>>,
    #[cfg(not(feature = "redis"))]
    servers: Mutex<Vec<Arc<()>>>,
    /// A quorum: a majority of the servers suffices (a lock can be taken then).
    majority: AtomicBool,
}

impl std::fmt::Debug for Readiness {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Readiness").finish_non_exhaustive()
    }
}

/// One Redis server (or a whole cluster): its command connections, and its inbox.
#[cfg(feature = "redis")]
pub(crate) struct ServerCheck {
    /// `host:port`, for the error.
    pub(crate) name: String,
    pub(crate) backend: Arc<RedisBackend>,
    /// The inbox's connection; `None` where the backend checks its inbox itself (a cluster).
    pub(crate) inbox: Option<InboxLine>,
}

impl Readiness {
    /// Count the manager ready when a majority of its servers answer (a quorum's rule for
    /// taking a lock), not only when all of them do.
    pub(crate) fn majority_suffices(&self) {
        self.majority.store(true, Ordering::Relaxed);
    }

    /// Whether enough servers answer now (each within its command timeout); else why not.
    pub(crate) async fn check(&self) -> Result<(), LockError> {
        let servers = self
            .servers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        if servers.is_empty() {
            return Ok(());
        }
        self.check_servers(&servers).await
    }
}

#[cfg(feature = "redis")]
impl Readiness {
    /// Add `server` to the servers a probe asks.
    pub(crate) fn add(&self, server: ServerCheck) {
        let mut servers = self.servers.lock().unwrap_or_else(|p| p.into_inner());
        servers.push(Arc::new(server));
    }

    async fn check_servers(&self, servers: &[Arc<ServerCheck>]) -> Result<(), LockError> {
        let asked = servers.iter().map(|server| server.check());
        let answers = futures_util::future::join_all(asked).await;
        let all = answers.len();
        let needed = match self.majority.load(Ordering::Relaxed) {
            true => all / 2 + 1,
            false => all,
        };
        let causes: Vec<String> = answers.into_iter().filter_map(Result::err).collect();
        let ready = all - causes.len();
        if ready >= needed {
            return Ok(());
        }
        let cause = match all {
            1 => causes.join(""),
            _ => format!(
                "{ready} of {all} Redis servers ready, {needed} needed: {}",
                causes.join("; ")
            ),
        };
        Err(LockError::unavailable("", cause))
    }
}

#[cfg(not(feature = "redis"))]
impl Readiness {
    async fn check_servers(&self, _: &[Arc<()>]) -> Result<(), LockError> {
        Ok(())
    }
}

#[cfg(feature = "redis")]
impl ServerCheck {
    /// Both the command connections and the inbox answer a PING, each within its timeout; else
    /// why not, naming the server.
    async fn check(&self) -> Result<(), String> {
        let inbox = async {
            match &self.inbox {
                Some(line) => line.ping().await,
                None => Ok(()),
            }
        };
        let (commands, inbox) = tokio::join!(self.backend.ping(), inbox);
        let failed = |what: &str, err| format!("{}: {what}: {err}", self.name);
        commands.map_err(|err| failed("commands", err))?;
        inbox.map_err(|err| failed("inbox", err))
    }
}
