//! Quorum locks (RedLock) against 3 and 5 real redis-server processes: the locks themselves
//! ([`locks`]), masters failing ([`faults`]) and what the fencing tokens promise ([`tokens`]).

#[path = "../support/mod.rs"]
mod support;

mod faults;
mod inspect;
mod layer;
mod locks;
mod ping;
mod tokens;
