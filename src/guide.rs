//! The guide: how the crate works, what it promises, and how to run it.
//!
//! The README covers the first day: a layer on a web service, keys, modes and what clients see.
//! This guide has the rest, one chapter per concept. Each concept is explained once, here, and
//! linked from elsewhere. The chapters are rustdoc modules with no items, so docs.rs shows them
//! and their examples run with the crate's doctests.
//!
//! | chapter | read it for |
//! |---|---|
//! | [`design`] | the manager, its inbox and watchdog, each lock mode, lock cohorting |
//! | [`guarantees`] | the safety contract, fencing tokens, what each promise rests on |
//! | [`redis`] | version, data model, ACL, TLS, persistence, Sentinel, Cluster, the failover window |
//! | [`operations`] | shutdown, outages, logs, metrics and their histogram buckets |
//! | [`cli`] | the `tower-lock` command: list, show, watch and force-release locks from a shell |
//! | [`direct_api`] | locks outside a request: jobs, several locks at once, leader election, re-entry, read/write, semaphores, quorum |
//! | [`chaos`] | the fault-injection run and its figures |

#[doc = include_str!("guide/design.md")]
pub mod design {}

#[doc = include_str!("guide/guarantees.md")]
pub mod guarantees {}

#[doc = include_str!("guide/redis.md")]
pub mod redis {}

#[doc = include_str!("guide/operations.md")]
pub mod operations {}

#[doc = include_str!("guide/cli.md")]
pub mod cli {}

#[doc = include_str!("guide/direct_api.md")]
pub mod direct_api {}

#[doc = include_str!("guide/chaos.md")]
pub mod chaos {}
