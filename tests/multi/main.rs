//! Several locks taken together (`LockOwner::acquire_all`, `try_acquire_all`) on the memory
//! backend, one real redis-server, a Redis Cluster (feature `cluster`, keys across slots) and a
//! quorum of masters: what one set promises ([`sets`]), the same for a request's composite keys
//! ([`layer`]), and exclusion without deadlock when many jobs take random pairs of the same keys
//! ([`pairs`]).

#[path = "../support/mod.rs"]
mod support;

mod layer;
mod pairs;
mod sets;
