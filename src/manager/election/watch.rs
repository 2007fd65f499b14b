//! `LeaderWatch`: the changes of who leads a name, for observers.

use std::time::Duration;

use super::Leader;
use crate::error::LockError;
use crate::manager::LockManager;

/// The shortest interval between two reads of a watched election.
const MIN_EVERY: Duration = Duration::from_millis(10);

/// The changes of who leads a name, from [`LockManager::watch_leader`].
///
/// [`LeaderWatch::changed`] waits for the next change: another leader, a new term, or nobody
/// leading. It reads the backend every interval, so a change shorter than that may go unseen.
#[derive(Debug)]
pub struct LeaderWatch {
    manager: LockManager,
    name: String,
    every: Duration,
    /// The last leader returned (`None` before the first read: any answer is a change).
    seen: Option<Option<(String, Option<u64>)>>,
}

impl LeaderWatch {
    pub(super) fn new(manager: LockManager, name: String, every: Duration) -> Self {
        LeaderWatch {
            manager,
            name,
            every: every.max(MIN_EVERY),
            seen: None,
        }
    }

    /// Wait until who leads differs from what this watch last returned, and return it (`None`:
    /// nobody leads). The first call returns at once, with the leader now.
    ///
    /// A leader is the same as long as its manager and term are. Errors of the backend are
    /// returned; the watch can be asked again afterwards.
    pub async fn changed(&mut self) -> Result<Option<Leader>, LockError> {
        loop {
            let leader = self.manager.leader(&self.name).await?;
            let now = leader.as_ref().map(|l| (l.manager.clone(), l.term));
            if self.seen.as_ref() != Some(&now) {
                self.seen = Some(now);
                return Ok(leader);
            }
            tokio::time::sleep(self.every).await;
        }
    }
}
