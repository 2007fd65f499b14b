//! `force_release` on Redis: every hold of one lock ends in one script call
//! (`force_release.lua`), which passes the lock on as a release does.

use super::{names, server_ms, slot_hint, RedisBackend, ScriptCall};
use crate::error::BoxError;
use crate::waiters::LockId;

impl RedisBackend {
    /// End every hold of `id` and pass the lock on; true when a hold was ended.
    pub(crate) async fn force_release(&self, id: &LockId) -> Result<bool, BoxError> {
        let mut call = ScriptCall::new(&self.scripts.force_release, 6);
        call.key(&**id)
            .key(names::waiters(id))
            .key(names::queue(id))
            .key(names::holders(id))
            .key(names::shared_queue(id))
            .key(names::fence(id))
            .arg(&*self.channels.prefix(id))
            .arg(server_ms(self.eviction));
        let (ended, more): (i64, i64) = self.invoke(slot_hint(id), &call).await?;
        if more == 1 {
            self.grant_on(id).await;
        }
        Ok(ended > 0)
    }
}
