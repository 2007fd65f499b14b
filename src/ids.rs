//! The names the engine passes around: a lock's id and an owner's id. It imports nothing of the
//! crate.

use std::collections::hash_map::RandomState;
use std::collections::HashMap;
use std::fmt;
use std::hash::{BuildHasher, Hash, Hasher};
use std::ops::Deref;
use std::sync::{Arc, LazyLock};

/// `value` hashed with a key of this process, as a `HashMap` hashes it: names a client picks
/// cannot be made to collide.
fn keyed_hash<T: Hash + ?Sized>(value: &T) -> u64 {
    static KEY: LazyLock<RandomState> = LazyLock::new(RandomState::new);
    KEY.hash_one(value)
}

/// A table keyed by ids that carry their hash ([`LockId`], [`OwnerId`], or a tuple of them), or
/// by numbers this process counts itself (a hold's number), which no client picks.
pub(crate) type IdMap<K, V> = HashMap<K, V, BuildHashed>;

/// Builds the hasher of an [`IdMap`]: each id's hash was made with a key already, so the table
/// only mixes the ids of a tuple together instead of hashing them again.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct BuildHashed;

impl BuildHasher for BuildHashed {
    type Hasher = Hashed;

    fn build_hasher(&self) -> Hashed {
        Hashed(0)
    }
}

/// The hasher of an [`IdMap`]: it mixes the ids' own hashes.
#[derive(Debug)]
pub(crate) struct Hashed(u64);

impl Hashed {
    fn mix(&mut self, word: u64) {
        // as FxHash combines words: the ids' hashes are keyed already, and this only spreads a
        // tuple's parts over the bits a table looks at
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

impl Hasher for Hashed {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        // Only ids are keys of an `IdMap`, and they write their hash alone. Other bytes (a key
        // type added later) are still hashed with the process's key, never mixed in plain.
        self.mix(keyed_hash(bytes));
    }

    fn write_u64(&mut self, word: u64) {
        self.mix(word);
    }
}

/// `<prefix><separator><n>`, and `<separator><tag>` after it when there is a tag, as one shared
/// string. Owner ids and wait names are made this way for every request: written without the
/// formatting machinery, and straight into the shared string (no `String` in between) when short,
/// as every name made from a manager id is.
pub(crate) fn numbered(prefix: &str, separator: char, n: u64, tag: Option<char>) -> Arc<str> {
    let mut digits = [0u8; 20];
    let digits = decimal(n, &mut digits);
    let (mut sep, mut tag_utf8) = ([0u8; 4], [0u8; 4]);
    let sep = separator.encode_utf8(&mut sep).as_bytes();
    let tag = tag.map_or(&[][..], |t| t.encode_utf8(&mut tag_utf8).as_bytes());
    let tail: [&[u8]; 2] = if tag.is_empty() {
        [&[], &[]]
    } else {
        [sep, tag]
    };
    joined(&[prefix.as_bytes(), sep, digits, tail[0], tail[1]])
        .unwrap_or_else(|| Arc::from(spelled_out(prefix, separator, n, tag)))
}

/// `<mark><prefix><separator><n>` as one shared string, as [`numbered`] writes it (a plain lock's
/// value: `plain/holds.rs`).
pub(crate) fn marked(mark: &str, prefix: &str, separator: char, n: u64) -> Arc<str> {
    let mut digits = [0u8; 20];
    let digits = decimal(n, &mut digits);
    let mut sep = [0u8; 4];
    let sep = separator.encode_utf8(&mut sep).as_bytes();
    joined(&[mark.as_bytes(), prefix.as_bytes(), sep, digits])
        .unwrap_or_else(|| Arc::from(format!("{mark}{prefix}{separator}{n}")))
}

/// `n` in decimal, written at the end of `digits`.
pub(crate) fn decimal(n: u64, digits: &mut [u8; 20]) -> &[u8] {
    let start = decimal_before(n, digits, 20);
    &digits[start..]
}

/// `n` in decimal, written into `buf` to end just before `end`: where it starts. `buf` has room
/// for every digit.
pub(crate) fn decimal_before(n: u64, buf: &mut [u8], end: usize) -> usize {
    let mut start = end;
    let mut rest = n;
    loop {
        start -= 1;
        buf[start] = b'0' + (rest % 10) as u8;
        rest /= 10;
        if rest == 0 {
            return start;
        }
    }
}

/// `parts` (whole strings and chars) one after another as a shared string, written through a
/// buffer on the stack; `None` when they do not fit in it.
fn joined(parts: &[&[u8]]) -> Option<Arc<str>> {
    let mut name = [0u8; 128];
    let mut len = 0;
    for part in parts {
        let room = name.get_mut(len..len + part.len())?;
        room.copy_from_slice(part);
        len += part.len();
    }
    // whole strings and chars joined: always UTF-8
    std::str::from_utf8(&name[..len]).ok().map(Arc::from)
}

/// [`numbered`] through the formatting machinery, for a name too long for its buffer.
fn spelled_out(prefix: &str, separator: char, n: u64, tag: &[u8]) -> String {
    let tag = std::str::from_utf8(tag).unwrap_or_default();
    match tag {
        "" => format!("{prefix}{separator}{n}"),
        tag => format!("{prefix}{separator}{n}{separator}{tag}"),
    }
}

/// A name and its keyed hash, made together: what both ids are.
#[derive(Clone)]
struct HashedName {
    name: Arc<str>,
    hash: u64,
}

impl HashedName {
    fn new(name: impl Into<Arc<str>>) -> Self {
        let name = name.into();
        let hash = keyed_hash(&name);
        HashedName { name, hash }
    }
}

impl PartialEq for HashedName {
    fn eq(&self, other: &Self) -> bool {
        self.hash == other.hash && self.name == other.name
    }
}

impl Eq for HashedName {}

impl Hash for HashedName {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(self.hash);
    }
}

impl fmt::Debug for HashedName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.name, f)
    }
}

/// The backend's name for one lock (for Redis, the lock's hash key). Wake-ups are routed by it.
///
/// The name is hashed once, when the id is made: a request looks its lock up in several tables
/// (live holds, cohorts, waiters, leases), and hashing the whole name for each costs more than
/// the rest of the lookup. The hash is keyed per process, as a `HashMap`'s own is, so names that
/// a client picks cannot be made to collide.
#[derive(Clone, PartialEq, Eq, Hash)]
pub(crate) struct LockId(HashedName);

impl LockId {
    /// The id of the lock named `name`.
    pub(crate) fn new(name: impl Into<Arc<str>>) -> Self {
        LockId(HashedName::new(name))
    }
}

impl Deref for LockId {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0.name
    }
}

impl fmt::Debug for LockId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl fmt::Display for LockId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self)
    }
}

/// Who holds a lock: one per request (`<manager id>:<n>`). Re-entry goes by it.
///
/// A type of its own, not a string, so that an owner cannot be passed where a wait's name
/// (`<owner>|<n>`, see `Waiter::name`) is meant, nor the other way round. Hashed once, as
/// [`LockId`] is.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct OwnerId(HashedName);

impl OwnerId {
    pub(crate) fn new(id: impl Into<Arc<str>>) -> Self {
        OwnerId(HashedName::new(id))
    }

    /// The id as a shared string (for tables keyed by lock and party).
    pub(crate) fn as_arc(&self) -> &Arc<str> {
        &self.0.name
    }
}

impl Deref for OwnerId {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0.name
    }
}

impl fmt::Display for OwnerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbered_names_join_their_parts() {
        assert_eq!(&*numbered("m", ':', 0, None), "m:0");
        assert_eq!(&*numbered("m:7", '|', 42, None), "m:7|42");
        assert_eq!(
            &*numbered("m:7", '|', u64::MAX, Some('r')),
            format!("m:7|{}|r", u64::MAX)
        );
        assert_eq!(&*numbered("", '|', 10, Some('é')), "|10|é");
        let long = "x".repeat(200);
        assert_eq!(&*numbered(&long, ':', 5, Some('w')), format!("{long}:5:w"));
        assert_eq!(&*marked("!", "m:7", '|', 42), "!m:7|42");
        assert_eq!(&*marked("", "m:7", '|', 0), "m:7|0");
        assert_eq!(&*marked("!", &long, '|', 3), format!("!{long}|3"));
    }

    #[test]
    fn ids_are_equal_and_hash_alike_when_their_names_are() {
        let (a, again, b) = (
            LockId::new("{n:a}"),
            LockId::new("{n:a}"),
            LockId::new("{n:b}"),
        );
        assert_eq!(a, again);
        assert_ne!(a, b);
        let hash = |id: &LockId| BuildHashed.hash_one(id);
        assert_eq!(hash(&a), hash(&again));
        assert_ne!(hash(&a), hash(&b));
    }

    #[test]
    fn a_table_of_lock_and_owner_tells_every_pair_apart() {
        let mut table: IdMap<(LockId, OwnerId), u32> = IdMap::default();
        let locks = ["a", "b", "ab", ""].map(LockId::new);
        let owners = ["m:1", "m:2", "m:12"].map(OwnerId::new);
        for (i, lock) in locks.iter().enumerate() {
            for (j, owner) in owners.iter().enumerate() {
                table.insert((lock.clone(), owner.clone()), (10 * i + j) as u32);
            }
        }
        assert_eq!(table.len(), 12);
        let key = (LockId::new("ab"), OwnerId::new("m:12"));
        assert_eq!(table.get(&key), Some(&22));
        // the same parts the other way round are another pair
        let swapped = (LockId::new("m:1"), OwnerId::new("a"));
        assert_eq!(table.get(&swapped), None);
    }
}
