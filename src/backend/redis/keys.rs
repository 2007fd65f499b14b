//! Redis key naming. Every key of lock K in namespace N starts with the hash tag `{N:K}`, so one
//! lock's state lives in one cluster slot. Names are escaped so that no name can choose its own hash
//! tag or collide with another name; names too long once escaped are replaced by their SHA-256.

use sha2::{Digest, Sha256};

/// Escaped names longer than this are stored under `#` + the hex SHA-256 of the name.
const MAX_ESCAPED_LEN: usize = 200;

/// Escape `name`: `{`, `}`, `:`, `%`, `#`, spaces and control bytes become `%XX`. `#` is escaped so a
/// hashed name (which starts with `#`) can never equal an escaped one.
pub(crate) fn escape(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for c in name.chars() {
        match c {
            '{' | '}' | ':' | '%' | '#' | ' ' | '\u{0}'..='\u{1f}' | '\u{7f}' => {
                out.push_str(&format!("%{:02X}", c as u32));
            }
            _ => out.push(c),
        }
    }
    if out.len() > MAX_ESCAPED_LEN {
        let digest = Sha256::digest(name.as_bytes());
        let mut hashed = String::with_capacity(1 + 64);
        hashed.push('#');
        for byte in digest {
            hashed.push_str(&format!("{byte:02x}"));
        }
        return hashed;
    }
    out
}

/// The Redis names of one namespace.
#[derive(Debug, Clone)]
pub(crate) struct KeySpace {
    namespace: String,
}

impl KeySpace {
    pub(crate) fn new(namespace: &str) -> Self {
        KeySpace {
            namespace: escape(namespace),
        }
    }

    /// The lock's hash: `{N:K}`. Its other keys append a suffix to it.
    pub(crate) fn lock(&self, name: &str) -> String {
        format!("{{{}:{}}}", self.namespace, escape(name))
    }

    /// The pub/sub channel of one manager's inbox.
    pub(crate) fn inbox(&self, manager_id: &str) -> String {
        format!("{}{manager_id}", self.inbox_prefix())
    }

    /// What release scripts prepend to a manager id to reach its inbox.
    pub(crate) fn inbox_prefix(&self) -> String {
        format!("{{{}}}:inbox:", self.namespace)
    }
}

/// The managers waiting for a lock (exclusive mode).
pub(crate) fn waiters(lock: &str) -> String {
    format!("{lock}:w")
}

/// A fair lock's queue: waiter -> arrival time.
pub(crate) fn queue(lock: &str) -> String {
    format!("{lock}:q")
}

/// A queued fair waiter's heartbeat key: it lives while the waiter's manager heartbeats it (the Lua
/// scripts build the same name in `heartbeat_key`).
pub(crate) fn heartbeat(lock: &str, waiter: &str) -> String {
    format!("{lock}:hb:{waiter}")
}

/// The lock's fencing counter.
pub(crate) fn fence(lock: &str) -> String {
    format!("{lock}:f")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_cannot_choose_their_hash_tag_or_collide() {
        let ks = KeySpace::new("billing");
        assert_eq!(ks.lock("account:42"), "{billing:account%3A42}");
        assert_eq!(ks.lock("a}{b"), "{billing:a%7D%7Bb}");
        // escaping is injective: the escape character itself is escaped
        assert_ne!(ks.lock("a:b"), ks.lock("a%3Ab"));
        // a namespace cannot be confused with a prefix of a name
        assert_ne!(
            KeySpace::new("a:b").lock("c"),
            KeySpace::new("a").lock("b:c")
        );
        // every key of the lock has one hash tag: the first {...}
        let lock = ks.lock("x{y}");
        assert_eq!(lock.matches('{').count(), 1);
        assert!(waiters(&lock).starts_with(&lock));
        assert!(fence(&lock).starts_with(&lock));
    }

    #[test]
    fn overlong_names_are_hashed_and_cannot_be_forged() {
        let long = "k".repeat(500);
        let escaped = escape(&long);
        assert_eq!(escaped.len(), 65);
        assert!(escaped.starts_with('#'));
        assert_ne!(escape(&escaped), escaped); // a user name equal to a hash gets its '#' escaped
        assert_ne!(escape(&"k".repeat(501)), escaped);
        assert_eq!(escape("\n\u{7f}"), "%0A%7F");
    }
}
