//! The builder's endpoints: resolving their URLs, and the checks a quorum's masters must pass.

use super::{redis, LockManagerBuilder};
use crate::error::LockError;

impl LockManagerBuilder {
    /// A quorum needs at least 3 masters, each server listed once, and a node timeout.
    pub(super) fn validate_quorum(
        &self,
        masters: &[::redis::ConnectionInfo],
    ) -> Result<(), LockError> {
        if masters.len() < 3 {
            return Err(LockError::Config(format!(
                "a quorum needs at least 3 independent Redis masters, got {}",
                masters.len()
            )));
        }
        // one server, whatever the db or the user: two databases of one server fail together
        let listed_before = |(i, m): &(usize, &::redis::ConnectionInfo)| {
            masters[..*i]
                .iter()
                .any(|earlier| earlier.addr() == m.addr())
        };
        if let Some((_, dup)) = masters.iter().enumerate().find(listed_before) {
            return Err(LockError::Config(format!(
                "Redis master {} is listed twice: a quorum needs independent masters",
                dup.addr()
            )));
        }
        Ok(())
    }
}

/// The connection info of every endpoint.
pub(super) fn resolve_all(
    endpoints: &[redis::Endpoint],
) -> Result<Vec<::redis::ConnectionInfo>, LockError> {
    endpoints.iter().map(redis::Endpoint::resolve).collect()
}
