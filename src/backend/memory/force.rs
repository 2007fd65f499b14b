//! `force_release` in memory: every hold of one lock ends under the table's lock, and the lock
//! passes on as on a release.

use std::sync::atomic::Ordering;
use std::time::Instant;

use super::MemoryBackend;
use crate::backend::TOKEN_BLOCK;
use crate::waiters::LockId;

impl MemoryBackend {
    /// End every hold of `id` and pass the lock on; true when a hold was ended. The token
    /// counter moves past the block of every hold ended, so that the next token is above every
    /// token its holder handed out.
    pub(crate) fn force_release(&self, id: &LockId) -> bool {
        let now = Instant::now();
        let mut table = self.table();
        if let Some(token) = table.holder(id, now).map(|held| held.token) {
            self.retire_block(token);
            table.locks.remove(id);
            if !self.grant_next(&mut table, id, now) {
                drop(table);
                self.waiters.wake_one(id);
            }
            return true;
        }
        let Some(lock) = table.shared.get_mut(id) else {
            return false;
        };
        let tokens = lock.force_release(now);
        for &token in &tokens {
            self.retire_block(token);
        }
        self.grant_shared(lock, id, now, None);
        if lock.is_idle() {
            table.shared.remove(id);
        }
        !tokens.is_empty()
    }

    /// Move the token counter to the end of the block that starts at `token`, if it is below.
    fn retire_block(&self, token: u64) {
        let end = token.saturating_add(u64::from(TOKEN_BLOCK) - 1);
        self.last_token.fetch_max(end, Ordering::Relaxed);
    }
}
