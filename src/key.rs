//! Lock names and (with the layer) the key extractors that derive them from requests.

use crate::error::KeyError;

/// The longest lock name accepted, in bytes. Longer names are rejected with [`KeyError::TooLong`];
/// names that are merely long are stored under a hash by the Redis backend.
pub const MAX_KEY_LEN: usize = 4096;

/// A validated lock name: non-empty and at most [`MAX_KEY_LEN`] bytes. Any other content is allowed;
/// backends escape it so that a name can never reach outside its own lock.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LockKey(String);

impl LockKey {
    /// Validate `name`.
    pub fn new(name: impl Into<String>) -> Result<Self, KeyError> {
        let name = name.into();
        if name.is_empty() {
            return Err(KeyError::Empty);
        }
        if name.len() > MAX_KEY_LEN {
            return Err(KeyError::TooLong {
                len: name.len(),
                max: MAX_KEY_LEN,
            });
        }
        Ok(LockKey(name))
    }

    /// The name as given.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for LockKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_empty_and_overlong_names() {
        assert_eq!(LockKey::new(""), Err(KeyError::Empty));
        let long = "x".repeat(MAX_KEY_LEN + 1);
        assert!(matches!(LockKey::new(long), Err(KeyError::TooLong { .. })));
        assert_eq!(
            LockKey::new("account:42").map(|k| k.to_string()),
            Ok("account:42".to_owned())
        );
    }
}
