//! The lock manager's backends, one area per module: the lock contract and fair locks on memory
//! and on a real redis-server, and what only Redis has (batched commands, the command
//! connection, wake-ups, lease deadlines, a user's pool, real faults, TLS).

#[path = "../support/mod.rs"]
mod support;

mod acl;
mod batching;
#[cfg(feature = "cluster")]
mod cluster;
#[cfg(feature = "cluster")]
mod cluster_failover;
mod contract;
mod dropped;
mod fair;
mod fair_liveness;
mod force_release;
mod frozen_server;
mod hand_over;
mod inspect;
mod inspect_meta;
mod lease_deadlines;
mod link;
mod many_waiters;
mod messages;
mod names;
mod ping;
mod plain;
mod redis_faults;
mod reentry;
mod restart_recovery;
mod sentinel;
mod shared;
mod shutdown;
#[cfg(feature = "tls")]
mod tls;
mod user_pool;
mod wakeups;
