//! The bounds of the builder's durations and counts: a value outside them is refused with
//! [`LockError::Config`] when the manager is built, naming the bound, rather than panicking (or
//! opening four billion connections) later in a background task.

use std::time::Duration;

use super::cohort::TOKEN_BLOCK;
use crate::error::LockError;
use crate::options::LockOptions;

/// The shortest lease and fair eviction: each is renewed every third of it.
const MIN_PERIOD: Duration = Duration::from_millis(30);

/// The most connections a command pool opens (each is a socket to Redis, opened at build).
pub(super) const MAX_POOL_SIZE: u32 = 1024;

/// The builder's knobs that have bounds.
pub(super) struct Knobs<'a> {
    pub(super) namespace: &'a str,
    pub(super) lease: Duration,
    pub(super) eviction: Duration,
    pub(super) command_timeout: Duration,
    pub(super) node_timeout: Duration,
    pub(super) pool_size: u32,
    pub(super) handoffs: u32,
}

impl Knobs<'_> {
    /// `Ok` when every knob is within its bounds, else the first one that is not.
    pub(super) fn check(&self) -> Result<(), LockError> {
        period("lease", self.lease)?;
        period("fair eviction", self.eviction)?;
        timeout("command timeout", self.command_timeout)?;
        timeout("node timeout", self.node_timeout)?;
        if self.namespace.is_empty() {
            return Err(LockError::Config("namespace is empty".to_owned()));
        }
        if self.handoffs >= TOKEN_BLOCK {
            return Err(LockError::Config(format!(
                "{} local hand-offs in a row are too many (at most {})",
                self.handoffs,
                TOKEN_BLOCK - 1
            )));
        }
        if self.pool_size > MAX_POOL_SIZE {
            return Err(LockError::Config(format!(
                "a pool of {} connections is too large (at most {MAX_POOL_SIZE})",
                self.pool_size
            )));
        }
        Ok(())
    }
}

/// A lease-like period: renewed every third of it, and kept by Redis in milliseconds.
fn period(what: &str, value: Duration) -> Result<(), LockError> {
    if value < MIN_PERIOD {
        return Err(LockError::Config(format!(
            "{what} {value:?} is too short (at least {MIN_PERIOD:?})"
        )));
    }
    too_long(what, value)
}

/// A timeout: zero would fail every command; one too long for the clock to count is no timeout.
fn timeout(what: &str, value: Duration) -> Result<(), LockError> {
    if value.is_zero() {
        return Err(LockError::Config(format!("{what} is zero (at least 1 ns)")));
    }
    Ok(())
}

fn too_long(what: &str, value: Duration) -> Result<(), LockError> {
    if value > LockOptions::MAX_LEASE {
        return Err(LockError::Config(format!(
            "{what} {value:?} is too long (at most {:?}, 365 days)",
            LockOptions::MAX_LEASE
        )));
    }
    Ok(())
}
