//! The Redis backend: a bb8 command pool (or a user's bb8-redis pool), the Lua scripts, and key
//! naming. The inbox (the one pub/sub connection) lives beside it; `connect` wires both for a
//! manager.

mod answers;
mod args;
mod batcher;
mod call;
mod channels;
#[cfg(feature = "cluster")]
mod cluster;
#[cfg(feature = "cluster")]
mod cluster_inbox;
#[cfg(feature = "cluster")]
mod cluster_nodes;
#[cfg(feature = "cluster")]
mod cluster_proof;
mod command_conn;
mod connect;
mod connector;
mod detached;
mod diagnose;
mod endpoint;
mod fair;
mod force;
mod handover;
mod inbox;
mod inbox_line;
mod inspect;
mod invoke;
mod link;
mod locator;
mod names;
mod packed;
mod ping;
mod plain;
mod pool;
mod postman;
mod renew;
mod scripts;
mod shared;
#[cfg(feature = "cluster")]
mod slots;
mod takeover;

use std::sync::Arc;
use std::time::Duration;

use redis::FromRedisValue;

use answers::{attempt, released, wait_mode};
pub(crate) use args::{flag, millis, server_ms, GrantArgs};
pub(crate) use call::ScriptCall;
use channels::Channels;
pub(crate) use connect::{connect, open_server, spawn_inbox, Server, Settings};
pub(crate) use endpoint::Endpoint;
pub(crate) use inbox::{Inbox, Subscription};
pub(crate) use inbox_line::InboxLine;
pub(crate) use locator::Locator;
pub(crate) use names::KeySpace;
pub(crate) use names::{fence as fence_key, waiters as waiters_key};
pub use pool::RedisPool;
pub(crate) use pool::{CommandPool, Connector};
pub(crate) use postman::Unclaimed;
pub(crate) use scripts::assemble as assemble_script;
use scripts::Scripts;

use super::{AcquireRequest, Attempt, Released};
use crate::error::BoxError;
use crate::ids::OwnerId;
use crate::key::LockKey;
use crate::waiters::{Departure, LockId, WaitRegistry};

/// One manager's view of one Redis server.
#[derive(Debug)]
pub(crate) struct RedisBackend {
    pool: CommandPool,
    keys: KeySpace,
    manager_id: Arc<str>,
    /// The manager's inbox channels, as scripts address them.
    channels: Arc<Channels>,
    /// On a cluster: the sharded subscriptions, made per slot before a request may wait there.
    #[cfg(feature = "cluster")]
    cluster: Option<Arc<cluster_inbox::ClusterInbox>>,
    /// The scripts this server runs (a cluster publishes on shards).
    scripts: &'static Scripts,
    timeout: Duration,
    /// Fair mode: a queued waiter without heartbeat for this long is evicted; a grant starts with a
    /// claim lease this long.
    eviction: Duration,
    /// The manager's waiters, to whom it hands the grants its own releases make.
    waiters: Arc<WaitRegistry>,
    /// The locks this manager holds on the plain path (see `plain.rs`).
    plain: plain::PlainHolds,
    /// This server is the manager's whole backend: when it leaves a command unanswered for the
    /// command timeout, every local waiter ends (see [`WaitRegistry::stalled`]). Not for a quorum's
    /// master (the others may answer) nor a cluster's node.
    whole: bool,
}

/// Which pooled connection carries the commands of lock `id` (FNV-1a of its name).
fn slot_hint(id: &str) -> u64 {
    id.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    })
}

/// How long an acquire attempt whose caller already got a timeout error keeps listening for its
/// reply. A frozen server runs the attempt when it resumes; if it took the lock, the reply lets the
/// manager release it at once instead of leaving it held for a whole lease.
pub(crate) const LATE_REPLY: Duration = Duration::from_secs(30);

/// How soon a request that found its lock's slot being moved tries again.
#[cfg(feature = "cluster")]
const MOVING_SLOT_RETRY: Duration = Duration::from_millis(50);

impl RedisBackend {
    pub(crate) fn new(
        pool: CommandPool,
        keys: KeySpace,
        manager_id: Arc<str>,
        timeout: Duration,
        eviction: Duration,
        waiters: Arc<WaitRegistry>,
        whole: bool,
    ) -> Self {
        RedisBackend {
            pool,
            channels: Arc::new(Channels::fixed(&keys)),
            scripts: &scripts::STANDALONE,
            #[cfg(feature = "cluster")]
            cluster: None,
            keys,
            manager_id,
            timeout,
            eviction,
            waiters,
            plain: plain::PlainHolds::default(),
            whole,
        }
    }

    pub(crate) fn lock_id(&self, key: &LockKey) -> LockId {
        LockId::new(self.keys.lock(key.as_str()))
    }

    /// A call of `script` on the lock `id`, whose other keys `others` are declared on a cluster
    /// only (see [`ScriptCall::on_lock`]).
    fn lock_call(
        &self,
        script: &'static redis::Script,
        id: &LockId,
        others: &[names::Suffixed<'_>],
    ) -> ScriptCall {
        ScriptCall::on_lock(script, id, others, self.scripts.declare_keys)
    }

    /// Open the command connections now, not on the first commands (see
    /// [`CommandPool::open_all`]).
    pub(crate) async fn open_connections(&self) {
        self.pool.open_all(self.timeout).await;
    }

    /// How long an acquire attempt may keep its caller waiting: the command timeout. Past it the
    /// caller gets an error, but the attempt itself goes on listening (see [`LATE_REPLY`]).
    pub(crate) fn attempt_timeout(&self) -> Duration {
        self.timeout
    }

    /// Run a script of a backend built on this one (the quorum backend's) on the connection that
    /// carries the commands of lock `id`, bounded by the command timeout like every call here.
    pub(crate) async fn run_script<T: FromRedisValue>(
        &self,
        id: &str,
        call: &ScriptCall,
    ) -> Result<T, BoxError> {
        self.invoke(slot_hint(id), call).await
    }

    pub(crate) async fn try_acquire(&self, req: &AcquireRequest<'_>) -> Result<Attempt, BoxError> {
        self.listen(req).await?;
        let attempt = self.attempt_in_mode(req).await;
        #[cfg(feature = "cluster")]
        if let Err(err) = &attempt {
            // a request that waits waits for the move to end, as for a holder
            if req.will_wait && cluster::moving_slot(err) {
                return Ok(Attempt::Busy {
                    ttl: Some(MOVING_SLOT_RETRY),
                });
            }
        }
        attempt
    }

    /// One attempt, in the script of the request's mode.
    async fn attempt_in_mode(&self, req: &AcquireRequest<'_>) -> Result<Attempt, BoxError> {
        if self.plain_path(req) {
            if let Some(attempt) = self.plain_acquire(req).await? {
                return Ok(attempt);
            }
        }
        if req.mode == crate::options::Mode::Fair {
            return self.fair_try_acquire(req).await;
        }
        if req.mode.is_shared() {
            return self.shared_try_acquire(req).await;
        }
        let id = req.id;
        let others = [names::waiters(id), names::fence(id), names::queue(id)];
        let mut call = self.lock_call(&self.scripts.acquire, id, &others);
        call.arg(&**req.owner)
            .arg(server_ms(req.lease))
            .arg(wait_mode(req));
        match req.held {
            Some(held) => call.arg(held),
            None => call.arg(""),
        };
        call.arg(req.about());
        let answer = self
            .invoke_within(slot_hint(req.id), &call, LATE_REPLY)
            .await?;
        attempt(answer)
    }

    /// Release the hold of `owner` of an exclusive or fair lock made under `token`, and no other
    /// (see [`crate::backend::Backend::release`]); a plain hold is found by its token.
    pub(crate) async fn release(
        &self,
        id: &LockId,
        owner: &OwnerId,
        token: u64,
        last_used: Option<u64>,
    ) -> Result<Released, BoxError> {
        if let Some(released) = self.release_if_plain(id, owner, token, last_used).await {
            return released;
        }
        self.release_hash(id, owner, Some(token)).await
    }

    /// Release `owner`'s hold of `id` as a lock hash, bound to `token` if given.
    async fn release_hash(
        &self,
        id: &LockId,
        owner: &OwnerId,
        token: Option<u64>,
    ) -> Result<Released, BoxError> {
        let call = self.release_hash_call(id, owner, token);
        let answer = self.invoke(slot_hint(id), &call).await?;
        self.released(id, answer).await
    }

    /// The script call of [`Self::release_hash`].
    fn release_hash_call(&self, id: &LockId, owner: &OwnerId, token: Option<u64>) -> ScriptCall {
        let others = [names::waiters(id), names::queue(id), names::fence(id)];
        let mut call = self.lock_call(&self.scripts.release, id, &others);
        call.arg(&**owner).arg(GrantArgs {
            claim_ms: server_ms(self.eviction),
            prefix: &self.channels.prefix(id),
        });
        if let Some(token) = token {
            call.arg(token);
        }
        call
    }

    /// On a cluster, subscribe to this manager's channel of the slot of `req`'s lock before an
    /// attempt that may record it as waiting there, or, when its holds may be taken over, before
    /// any attempt (once per slot).
    async fn listen(&self, req: &AcquireRequest<'_>) -> Result<(), BoxError> {
        #[cfg(feature = "cluster")]
        if let Some(inbox) = &self.cluster {
            if req.will_wait || inbox.proves() {
                inbox.listen(slots::slot(req.id)).await?;
            }
        }
        let _ = req;
        Ok(())
    }

    pub(crate) async fn abandon(&self, id: &LockId, departure: Departure) -> Result<(), BoxError> {
        let mut call = ScriptCall::new(&self.scripts.abandon, 2);
        call.key(&**id)
            .key(names::waiters(id))
            .arg(&*self.manager_id)
            .arg(flag(departure.last))
            .arg(flag(departure.pass_on))
            .arg(&*self.channels.prefix(id));
        self.invoke::<i64>(slot_hint(id), &call).await.map(drop)
    }
}
