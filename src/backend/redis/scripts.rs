//! The Lua scripts. Each state change is one script call: EVALSHA, reloaded on NOSCRIPT by
//! `redis::Script`. Every script starts with the helpers of `common.lua`. The pool loads them all
//! when it opens a connection, so that no hand-off or heartbeat pays a NOSCRIPT round trip.

use std::sync::LazyLock;

use redis::Script;

macro_rules! source {
    ($file:literal) => {
        concat!(include_str!("common.lua"), include_str!($file))
    };
}

const ACQUIRE_SRC: &str = source!("acquire.lua");
const RELEASE_SRC: &str = source!("release.lua");
const RENEW_SRC: &str = source!("renew.lua");
const ABANDON_SRC: &str = source!("abandon.lua");
const FAIR_ACQUIRE_SRC: &str = source!("fair_acquire.lua");
const FAIR_RELEASE_SRC: &str = source!("fair_release.lua");
const FAIR_ABANDON_SRC: &str = source!("fair_abandon.lua");
const HEARTBEAT_SRC: &str = source!("heartbeat.lua");

/// Every script's source, for loading them up front.
pub(crate) const ALL: [&str; 8] = [
    ACQUIRE_SRC,
    RELEASE_SRC,
    RENEW_SRC,
    ABANDON_SRC,
    FAIR_ACQUIRE_SRC,
    FAIR_RELEASE_SRC,
    FAIR_ABANDON_SRC,
    HEARTBEAT_SRC,
];

/// Take an exclusive lock or record the waiting manager.
pub(crate) static ACQUIRE: LazyLock<Script> = LazyLock::new(|| Script::new(ACQUIRE_SRC));
/// Release one hold; tell one waiting manager when the lock frees.
pub(crate) static RELEASE: LazyLock<Script> = LazyLock::new(|| Script::new(RELEASE_SRC));
/// Renew a batch of leases.
pub(crate) static RENEW: LazyLock<Script> = LazyLock::new(|| Script::new(RENEW_SRC));
/// Forget a waiting manager and pass an unused wake-up on.
pub(crate) static ABANDON: LazyLock<Script> = LazyLock::new(|| Script::new(ABANDON_SRC));
/// Take a fair lock or join its queue.
pub(crate) static FAIR_ACQUIRE: LazyLock<Script> = LazyLock::new(|| Script::new(FAIR_ACQUIRE_SRC));
/// Release one hold of a fair lock; grant it to the next waiter when it frees.
pub(crate) static FAIR_RELEASE: LazyLock<Script> = LazyLock::new(|| Script::new(FAIR_RELEASE_SRC));
/// Leave a fair queue; pass on a grant that raced with leaving.
pub(crate) static FAIR_ABANDON: LazyLock<Script> = LazyLock::new(|| Script::new(FAIR_ABANDON_SRC));
/// Renew the heartbeat deadlines of a batch of queued fair waiters.
pub(crate) static HEARTBEAT: LazyLock<Script> = LazyLock::new(|| Script::new(HEARTBEAT_SRC));
