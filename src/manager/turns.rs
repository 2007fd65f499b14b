//! One attempt at a time per owner and lock. An attempt tells the backend which hold its owner
//! has of the lock (its live guards' token, or none), and a hold of the owner the backend has
//! under another token is replaced as one the owner no longer has (a restart from a snapshot
//! brought it back). That is only true while no other attempt of the owner on the lock is on its
//! way: its hold, made but not yet answered, would be taken for a stale one. So an owner's
//! attempts on one lock take turns; requests of one owner that wait for one lock already do (see
//! `ticket.rs`), and the turn also covers a `try_acquire` beside them, and an attempt whose
//! caller went away but whose answer is still out.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use tokio::sync::Notify;

use crate::ids::{IdMap, OwnerId};
use crate::waiters::LockId;

/// The owners' attempts on the backend that are out, by lock and owner.
#[derive(Debug, Default)]
pub(crate) struct Turns {
    /// Each attempt out, and whether another attempt waits for its turn.
    out: Mutex<IdMap<(LockId, OwnerId), bool>>,
    /// Notified when a turn another attempt waited for ends.
    ended: Notify,
}

/// The turn of one attempt of an owner on a lock: others of the same owner and lock wait until
/// it is dropped. Shared by the attempt's call (until its answer came) and its request (until the
/// hold it took is among the live guards).
#[derive(Debug)]
pub(crate) struct Turn {
    turns: Arc<Turns>,
    key: (LockId, OwnerId),
}

impl Turns {
    fn out(&self) -> MutexGuard<'_, IdMap<(LockId, OwnerId), bool>> {
        // every operation leaves the map consistent before it could panic
        self.out.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The turn of an attempt of `owner` on `id`, once no other attempt of theirs is out; `None`
    /// when `deadline` passed first.
    pub(crate) async fn take(
        self: &Arc<Self>,
        id: &LockId,
        owner: &OwnerId,
        deadline: Option<Instant>,
    ) -> Option<Arc<Turn>> {
        let key = (id.clone(), owner.clone());
        loop {
            let ended = self.ended.notified();
            tokio::pin!(ended);
            ended.as_mut().enable();
            {
                let mut out = self.out();
                match out.get_mut(&key) {
                    None => {
                        out.insert(key.clone(), false);
                        let turns = self.clone();
                        return Some(Arc::new(Turn { turns, key }));
                    }
                    Some(waited_for) => *waited_for = true,
                }
            }
            match deadline {
                Some(deadline) => tokio::time::timeout_at(deadline.into(), ended).await.ok()?,
                None => ended.await,
            }
        }
    }
}

impl Drop for Turn {
    fn drop(&mut self) {
        let waited_for = self.turns.out().remove(&self.key);
        if waited_for == Some(true) {
            self.turns.ended.notify_waiters();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn an_owners_attempts_on_one_lock_take_turns() {
        let turns = Arc::new(Turns::default());
        let (id, other_id) = (LockId::new("k"), LockId::new("other"));
        let (owner, other_owner) = (OwnerId::new("m:1"), OwnerId::new("m:2"));
        let first = turns.take(&id, &owner, None).await.expect("a turn");
        // another lock, another owner: no wait
        let soon = Some(Instant::now() + Duration::from_millis(20));
        assert!(turns.take(&other_id, &owner, soon).await.is_some());
        assert!(turns.take(&id, &other_owner, soon).await.is_some());
        // the same owner and lock: waits for the first turn to end
        assert!(turns.take(&id, &owner, soon).await.is_none());
        let waiting = tokio::spawn({
            let (turns, id, owner) = (turns.clone(), id.clone(), owner.clone());
            async move { turns.take(&id, &owner, None).await.is_some() }
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiting.is_finished());
        drop(first);
        assert!(waiting.await.expect("the waiting attempt"));
    }
}
