//! `Keys`: the lock names one request needs, and `IntoKeys`: what an extractor function may return.

use super::LockKey;
use crate::error::KeyError;

/// The lock names one request needs: none (the request passes through without a lock), one, or
/// several (acquired in sorted order, so that two requests needing the same pair never deadlock).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Keys(Vec<LockKey>);

impl Keys {
    /// No lock: the request passes through.
    pub fn none() -> Self {
        Keys(Vec::new())
    }

    /// One lock.
    pub fn one(key: LockKey) -> Self {
        Keys(vec![key])
    }

    /// Add a lock.
    pub fn push(&mut self, key: LockKey) {
        self.0.push(key);
    }

    /// True when the request needs no lock.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// How many names (duplicates included).
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// The names, in the order they were added.
    pub fn iter(&self) -> impl Iterator<Item = &LockKey> {
        self.0.iter()
    }

    /// The names in the order they must be acquired: sorted, without duplicates.
    pub fn into_sorted(mut self) -> Vec<LockKey> {
        self.0.sort_unstable();
        self.0.dedup();
        self.0
    }
}

impl From<LockKey> for Keys {
    fn from(key: LockKey) -> Self {
        Keys::one(key)
    }
}

impl FromIterator<LockKey> for Keys {
    fn from_iter<I: IntoIterator<Item = LockKey>>(iter: I) -> Self {
        Keys(iter.into_iter().collect())
    }
}

impl IntoIterator for Keys {
    type Item = LockKey;
    type IntoIter = std::vec::IntoIter<LockKey>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter()
    }
}

/// What a [`from_fn`](super::from_fn) closure may return: `Option<String>` (the common case; `None`
/// passes the request through), a `String`, a `Vec` of names, a [`Keys`], or a `Result` of any of
/// these with a [`KeyError`] (answered with 400 Bad Request).
pub trait IntoKeys {
    /// Validate the names.
    fn into_keys(self) -> Result<Keys, KeyError>;
}

impl IntoKeys for Keys {
    fn into_keys(self) -> Result<Keys, KeyError> {
        Ok(self)
    }
}

impl IntoKeys for LockKey {
    fn into_keys(self) -> Result<Keys, KeyError> {
        Ok(Keys::one(self))
    }
}

impl IntoKeys for String {
    fn into_keys(self) -> Result<Keys, KeyError> {
        LockKey::new(self).map(Keys::one)
    }
}

impl IntoKeys for &'static str {
    fn into_keys(self) -> Result<Keys, KeyError> {
        LockKey::new(self).map(Keys::one)
    }
}

impl<T: IntoKeys> IntoKeys for Option<T> {
    fn into_keys(self) -> Result<Keys, KeyError> {
        self.map_or_else(|| Ok(Keys::none()), IntoKeys::into_keys)
    }
}

impl<T: IntoKeys> IntoKeys for Vec<T> {
    fn into_keys(self) -> Result<Keys, KeyError> {
        let mut keys = Keys::none();
        for item in self {
            keys.0.extend(item.into_keys()?.0);
        }
        Ok(keys)
    }
}

impl<T: IntoKeys> IntoKeys for Result<T, KeyError> {
    fn into_keys(self) -> Result<Keys, KeyError> {
        self.and_then(IntoKeys::into_keys)
    }
}
