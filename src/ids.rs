//! The names the engine passes around: a lock's id and an owner's id. It imports nothing of the
//! crate.

use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

/// The backend's name for one lock (for Redis, the lock's hash key). Wake-ups are routed by it.
pub(crate) type LockId = Arc<str>;

/// Who holds a lock: one per request (`<manager id>:<n>`). Re-entry goes by it.
///
/// A type of its own, not a string, so that an owner cannot be passed where a wait's name
/// (`<owner>|<n>`, see `Waiter::name`) is meant, nor the other way round.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct OwnerId(Arc<str>);

impl OwnerId {
    pub(crate) fn new(id: impl Into<Arc<str>>) -> Self {
        OwnerId(id.into())
    }

    /// The id as a shared string (for tables keyed by lock and party).
    pub(crate) fn as_arc(&self) -> &Arc<str> {
        &self.0
    }
}

impl Deref for OwnerId {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for OwnerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}
