//! `LockOptions::max_hold`, the ceiling of a watchdog-kept hold, on real servers: a hold that
//! would be renewed forever ends at its ceiling (its `lost()` fires then, and another manager
//! takes the lock), through the direct API in every mode on memory, a redis-server, a Redis
//! Cluster and a quorum, through a cohort's re-entries, and through the tower layer.

#[path = "../support/mod.rs"]
mod support;

mod ceiling;
mod direct;
mod layer;
mod quorum;
mod reentry;
