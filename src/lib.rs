#![forbid(unsafe_code)]
// On docs.rs (nightly, `--cfg docsrs`), each item behind a feature is marked with that feature.
#![cfg_attr(docsrs, feature(doc_cfg))]
// Without the Redis backend, the plumbing it shares with memory (waiter records, wake-ups to
// other processes, the builder's Redis paths) is partly unused.
#![cfg_attr(not(feature = "redis"), allow(unused, irrefutable_let_patterns))]
#![warn(missing_docs)]
// shuttle's lock makes the futures' auto-trait checks deeper (the schedule checks' build only)
#![cfg_attr(all(test, tower_lock_shuttle), recursion_limit = "256")]
// A dependency the library does not use fails the build. Test builds of the library are left out:
// they also link the dev-dependencies, which each test target uses only in part.
#![cfg_attr(not(test), deny(unused_crate_dependencies))]
//! # tower-lock
//!
//! Serialize work on a resource across every replica of a service: "only one request at a time may
//! touch account 42". Locks live in Redis 7.0 or later (or, for one process, in memory); one
//! [`LockManager`] per process multiplexes ONE pub/sub connection and ONE lease-renewal task across
//! every request. The examples on this page need no feature: they run on the memory backend.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), tower_lock::LockError> {
//! use std::time::Duration;
//! use tower_lock::{LockManager, LockOptions};
//!
//! // LockManager::redis("redis://127.0.0.1:6379").await? for every replica of a service
//! let manager = LockManager::memory();
//! let opts = LockOptions::exclusive().wait_timeout(Duration::from_secs(5));
//!
//! let guard = manager.acquire("account:42", &opts).await?;
//! // ... read, modify and write account 42; pass the fencing token to the storage ...
//! let _token = guard.fencing_token();
//! guard.release().await?;
//!
//! // re-entry belongs to an owner (one per request), never to a thread
//! let owner = manager.owner();
//! let outer = owner.acquire("account:42", &opts).await?;
//! let inner = owner.acquire("account:42", &opts).await?;
//! assert_eq!(outer.fencing_token(), inner.fencing_token());
//! # Ok(())
//! # }
//! ```
//!
//! Besides exclusive locks there are fair (FIFO) locks, the same locks taken in arrival order (a
//! lock layer's default), fair read/write locks (any number of reads or one write, FIFO across
//! both) and semaphores (at most n holds): see [`LockOptions`].
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), tower_lock::LockError> {
//! use tower_lock::{LockManager, LockOptions};
//!
//! let manager = LockManager::memory();
//! let first = manager.acquire("doc:7", &LockOptions::read()).await?;
//! let second = manager.acquire("doc:7", &LockOptions::read()).await?; // reads run together
//! assert!(manager.try_acquire("doc:7", &LockOptions::write()).await?.is_none());
//! assert!(second.fencing_token() > first.fencing_token()); // every hold its own token
//! # Ok(())
//! # }
//! ```
//!
//! In a web service, a [`LockLayer`] does this for every request: a key extractor from [`key`] names
//! the locks (`key::pattern("/accounts/{id}")` locks `accounts/42` for `PUT /accounts/42/orders`), the
//! handler runs while they are held, and a busy lock, a timeout or an unreachable Redis becomes an
//! HTTP or gRPC response. It works with axum, tonic and any tower service: see [`layer`]. actix-web
//! gets the same through `actix::LockMiddleware` (feature `actix`).
//!
//! # Features
//!
//! Each integration is a Cargo feature, so a service builds only what it uses. Without any, the
//! crate has the memory backend and the tower layer, on 30 crates. The counts below are the crates
//! a feature adds, as `cargo tree -e normal` lists them.
//!
//! | feature | turns on | costs |
//! |---|---|---|
//! | `redis` (default) | the Redis backends: `LockManager::redis`, `LockManager::quorum`, the builder's `redis`, `redis_client`, `redis_pool`, `sentinel` and `quorum`, and `RedisPool` | `redis`, `bb8`, `bb8-redis`, `sha2`: 62 crates |
//! | `tls` | `rediss://` URLs, through rustls and its `ring` provider; turns on `redis` | `rustls`, `tokio-rustls`, `rustls-native-certs`, `ring`: 11 crates over `redis` |
//! | `actix` | `actix::LockMiddleware`, the layer's locks for actix-web 4 | `actix-web` without its default features: 41 crates over the default |
//! | `cluster` | `LockManager::cluster` and the builder's `cluster`: locks on a Redis Cluster, over sharded pub/sub; turns on `redis` | redis-rs's `cluster-async`: 2 crates over `redis` |
//! | `metrics` | the `tower_lock_*` counters, gauges and histograms, through the `metrics` facade | `metrics`: 3 crates |
//! | `axum` | extractors keyed by `MatchedPath`, `FromRequestParts` for [`LockInfo`] and [`LockOwner`], `IntoResponse` for [`Rejection`] | `axum` with only `matched-path`: 8 crates over `redis` |
//! | `tonic` | rejections built as `tonic::Status`, `From<LockError> for tonic::Status` | `tonic` without its default features: 5 crates over `redis` |
//! | `cli` | the `tower-lock` binary ([guide](guide::cli)); nothing in the library; turns on `redis`, `cluster`, `tls` | `clap`, `serde_json`, `crossterm`: 30 crates over those three |
//!
//! axum and tonic need no feature for the lock itself: [`LockLayer`] is a tower layer, and both
//! take tower layers. Their features add conveniences on top. The metrics feature records through
//! the facade only; the application installs the exporter it wants.
//!
//! # Where to go next
//!
//! The [`guide`] explains the rest, one concept per chapter: the [design](guide::design), the
//! [guarantees](guide::guarantees) and what each rests on, [Redis](guide::redis) (Redis 7, data
//! model, ACL, persistence, Sentinel, Cluster), [operations](guide::operations) (shutdown,
//! outages, metrics), the [`tower-lock` command](guide::cli) (feature `cli`), the
//! [direct API](guide::direct_api) and the [chaos run](guide::chaos).

#[cfg(feature = "actix")]
pub mod actix;
#[cfg(feature = "axum")]
pub mod axum;
mod backend;
mod background;
mod error;
pub mod guide;
mod ids;
mod inbox_proof;
pub mod key;
pub mod layer;
mod lease;
mod manager;
mod options;
mod quorum_proof;
mod request;
mod saturating;
#[cfg(all(test, tower_lock_shuttle))]
mod schedules;
mod state;
mod sync;
mod telemetry;
#[cfg(feature = "tonic")]
mod tonic_status;
mod waiters;
mod watchdog;

// The `tower-lock` binary's own dependencies (feature `cli`): the library does not use them.
#[cfg(feature = "cli")]
use {clap as _, crossterm as _, serde_json as _};

#[cfg(feature = "redis")]
pub use backend::redis::RedisPool;
pub use error::{BoxError, KeyError, LockError};
pub use layer::{LockLayer, LockService};
pub use manager::{
    JobHandle, JobRun, JobSchedule, Leader, LeaderWatch, Leadership, LockGuard, LockGuards,
    LockInfo, LockManager, LockManagerBuilder, LockOwner, DEFAULT_COMMAND_TIMEOUT,
    DEFAULT_FAIR_EVICTION, DEFAULT_LEASE, DEFAULT_LIST_LIMIT, DEFAULT_NODE_TIMEOUT,
    DEFAULT_TAKEOVER_GRACE,
};
pub use options::{Lease, LockOptions, Mode};
pub use request::{
    HeldLocks, OnLeaseLost, RejectReason, Rejection, RequestOptions, UnlockedCounter,
};
pub use state::{HolderState, LockFamily, LockState, WaiterState};

/// The README's examples, compiled (and, where they do not serve, run) as doctests.
///
/// Its quick starts use the `axum`, `tonic` and `actix` features. The README shows plain code
/// without hidden lines, so it cannot turn those off itself: it is tested with the three on, as
/// the test command does (`--all-features`).
#[cfg(all(doctest, feature = "axum", feature = "tonic", feature = "actix"))]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
