//! `Keys`: the lock names one request needs, and `IntoKeys`: what an extractor function may return.

use super::LockKey;
use crate::error::KeyError;

/// The lock names one request needs: none (the request passes through without a lock), one, or
/// several (acquired in sorted order, so that two requests needing the same pair never deadlock).
///
/// It also says when an optional extractor did not match the request ([`Keys::unmatched`]): the
/// layer then lets the request through without that extractor's lock, counts it and logs it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Keys {
    names: Vec<LockKey>,
    unmatched: Option<String>,
}

impl Keys {
    /// No lock: the request passes through.
    pub fn none() -> Self {
        Keys::default()
    }

    /// One lock.
    pub fn one(key: LockKey) -> Self {
        Keys {
            names: vec![key],
            unmatched: None,
        }
    }

    /// No lock, because an optional extractor did not match the request. `what` names the
    /// extractor (`"pattern /accounts/{id}"`), not the request.
    ///
    /// The layer lets such a request through, counts it (`LockLayer::unlocked_counter`) and
    /// warns about it once a minute per extractor and route, since running unlocked is what a
    /// mistaken extractor looks like.
    pub fn unmatched(what: impl Into<String>) -> Self {
        Keys {
            names: Vec::new(),
            unmatched: Some(what.into()),
        }
    }

    /// The extractor that did not match, when an optional one did not ([`Keys::unmatched`]).
    pub fn unmatched_by(&self) -> Option<&str> {
        self.unmatched.as_deref()
    }

    /// Add a lock.
    pub fn push(&mut self, key: LockKey) {
        self.names.push(key);
    }

    /// Add `other`'s locks, and its unmatched extractor when this has none.
    pub fn extend(&mut self, other: Keys) {
        self.names.extend(other.names);
        if self.unmatched.is_none() {
            self.unmatched = other.unmatched;
        }
    }

    /// The same request with every name changed by `rename` (the unmatched extractor is kept).
    pub fn try_map(
        self,
        rename: impl FnMut(LockKey) -> Result<LockKey, KeyError>,
    ) -> Result<Keys, KeyError> {
        Ok(Keys {
            names: self
                .names
                .into_iter()
                .map(rename)
                .collect::<Result<_, _>>()?,
            unmatched: self.unmatched,
        })
    }

    /// True when the request needs no lock.
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// How many names (duplicates included).
    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// The names, in the order they were added.
    pub fn iter(&self) -> impl Iterator<Item = &LockKey> {
        self.names.iter()
    }

    /// The names in the order they must be acquired: sorted, without duplicates.
    pub fn into_sorted(self) -> Vec<LockKey> {
        super::in_lock_order(self.names)
    }
}

impl From<LockKey> for Keys {
    fn from(key: LockKey) -> Self {
        Keys::one(key)
    }
}

impl FromIterator<LockKey> for Keys {
    fn from_iter<I: IntoIterator<Item = LockKey>>(iter: I) -> Self {
        Keys {
            names: iter.into_iter().collect(),
            unmatched: None,
        }
    }
}

impl IntoIterator for Keys {
    type Item = LockKey;
    type IntoIter = std::vec::IntoIter<LockKey>;

    fn into_iter(self) -> Self::IntoIter {
        self.names.into_iter()
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
            keys.extend(item.into_keys()?);
        }
        Ok(keys)
    }
}

impl<T: IntoKeys> IntoKeys for Result<T, KeyError> {
    fn into_keys(self) -> Result<Keys, KeyError> {
        self.and_then(IntoKeys::into_keys)
    }
}
