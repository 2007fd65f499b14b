//! Leader election: one candidate of many leads a name at a time, elected in arrival order.
//!
//! A scheduler, a queue consumer or a cache warmer runs on one replica, and another must take
//! over when it dies. A leadership is a write hold of the name's lock, so candidates queue in
//! FIFO order (a quorum queues nothing: there it is an exclusive hold, and the order is not
//! kept). The term is the hold's fencing token: terms strictly increase from leader to leader,
//! and storage that checks them refuses a deposed leader's late writes. A leader whose process
//! dies is replaced once its hold is taken over (about a second where takeover is on, see the
//! guide's "Dead holders") or, elsewhere, once its lease runs out.

use std::time::Duration;

use super::{LockGuard, LockManager};
use crate::error::LockError;
use crate::options::{LockOptions, Mode};
use crate::state::HolderState;

mod watch;

pub use watch::LeaderWatch;

/// This process's leadership of a name, from [`LockManager::campaign`]: held until resigned,
/// dropped, or lost.
///
/// A leader must stop acting as one as soon as [`Leadership::lost`] resolves: its hold may have
/// run out (Redis unreachable for its lease) or been taken over, and another candidate may lead.
#[derive(Debug)]
#[must_use = "the leadership ends as soon as it is dropped"]
pub struct Leadership {
    guard: LockGuard,
}

impl Leadership {
    /// The name led.
    pub fn name(&self) -> &str {
        self.guard.key()
    }

    /// The term: the fencing token of this leadership, larger than every earlier leader's.
    ///
    /// Pass it with every write the leader makes, so that storage can refuse an older term's.
    pub fn term(&self) -> u64 {
        self.guard.fencing_token()
    }

    /// True once the leadership is known lost or may have run out.
    pub fn is_lost(&self) -> bool {
        self.guard.is_lost()
    }

    /// Resolves when the leadership is known lost or may have run out: stop leading then.
    pub async fn lost(&self) {
        self.guard.lost().await
    }

    /// Step down now, so that the next candidate is elected at once.
    ///
    /// [`LockError::NotHeld`] when the leadership had been lost already.
    pub async fn resign(self) -> Result<(), LockError> {
        self.guard.release().await
    }
}

/// Who leads a name now, as [`LockManager::leader`] reads it from the backend.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Leader {
    /// The id of the leader's manager ([`LockManager::id`]).
    pub manager: String,
    /// The leader's process, as its manager names itself
    /// ([`LockManagerBuilder::label`](crate::LockManagerBuilder::label)).
    pub label: Option<String>,
    /// The leader's term, when the backend records it.
    pub term: Option<u64>,
    /// How long it has led, by the server's clock, when the backend records it.
    pub since: Option<Duration>,
}

impl From<HolderState> for Leader {
    fn from(holder: HolderState) -> Self {
        Leader {
            manager: holder.manager,
            label: holder.label,
            term: holder.token,
            since: holder.held_for,
        }
    }
}

impl LockManager {
    /// Wait until this process is elected leader of `name`, then lead until the returned
    /// [`Leadership`] is resigned, dropped or lost.
    ///
    /// Candidates are elected in the order they called (except on a quorum, which keeps no
    /// order). The lock `name` is the election's: do not take it for anything else. Cancel the
    /// campaign by dropping its future; wrap it in `tokio::time::timeout` to give up after a
    /// while.
    pub async fn campaign(&self, name: &str) -> Result<Leadership, LockError> {
        let owner = self.owner().request(format!("campaign for {name}"));
        let opts = self.election_options().wait_forever();
        let guard = owner.acquire(name, &opts).await?;
        Ok(Leadership { guard })
    }

    /// Who leads `name` now; `None` while nobody does.
    ///
    /// One read of the backend. The answer may be stale by the time it arrives: a leader acts on
    /// its own [`Leadership`], never on this.
    pub async fn leader(&self, name: &str) -> Result<Option<Leader>, LockError> {
        let state = self.inspect(name).await?;
        Ok(state.holders.into_iter().next().map(Leader::from))
    }

    /// Watch who leads `name`, reading it every `every` (at least 10 ms): a stream of changes for
    /// observers (dashboards, clients that follow the leader).
    ///
    /// Candidates send nothing for it; each read is one command.
    pub fn watch_leader(&self, name: &str, every: Duration) -> LeaderWatch {
        LeaderWatch::new(self.clone(), name.to_owned(), every)
    }

    /// How a candidate holds the election's lock: a write hold (FIFO, its token recorded where
    /// observers read it), or an exclusive one where queued modes are refused (a quorum).
    fn election_options(&self) -> LockOptions {
        match self.shared.backend.unsupported(Mode::Write) {
            None => LockOptions::write(),
            Some(_) => LockOptions::exclusive(),
        }
    }
}
