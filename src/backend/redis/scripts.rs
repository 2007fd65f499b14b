//! The Lua scripts. Each state change is one script call: EVALSHA, reloaded on NOSCRIPT by
//! `redis::Script`. Every script starts with the helpers of `common.lua`.

use std::sync::LazyLock;

use redis::Script;

macro_rules! script {
    ($file:literal) => {
        Script::new(concat!(include_str!("common.lua"), include_str!($file)))
    };
}

/// Take an exclusive lock or record the waiting manager.
pub(crate) static ACQUIRE: LazyLock<Script> = LazyLock::new(|| script!("acquire.lua"));
/// Release one hold; tell one waiting manager when the lock frees.
pub(crate) static RELEASE: LazyLock<Script> = LazyLock::new(|| script!("release.lua"));
/// Renew a batch of leases.
pub(crate) static RENEW: LazyLock<Script> = LazyLock::new(|| script!("renew.lua"));
/// Forget a waiting manager and pass an unused wake-up on.
pub(crate) static ABANDON: LazyLock<Script> = LazyLock::new(|| script!("abandon.lua"));
/// Take a fair lock or join its queue.
pub(crate) static FAIR_ACQUIRE: LazyLock<Script> = LazyLock::new(|| script!("fair_acquire.lua"));
/// Release one hold of a fair lock; grant it to the next waiter when it frees.
pub(crate) static FAIR_RELEASE: LazyLock<Script> = LazyLock::new(|| script!("fair_release.lua"));
/// Leave a fair queue; pass on a grant that raced with leaving.
pub(crate) static FAIR_ABANDON: LazyLock<Script> = LazyLock::new(|| script!("fair_abandon.lua"));
/// Renew the heartbeat deadlines of a batch of queued fair waiters.
pub(crate) static HEARTBEAT: LazyLock<Script> = LazyLock::new(|| script!("heartbeat.lua"));
