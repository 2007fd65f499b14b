//! Redis key naming. Every key of lock K in namespace N starts with the hash tag `{N:K}`, so one
//! lock's state lives in one cluster slot. Names are escaped so that no name can choose its own hash
//! tag or collide with another name; names too long once escaped are replaced by their SHA-256.
//! Outside a cluster the scripts of exclusive and fair locks are given the lock's key alone, and
//! name its other keys themselves with the suffixes below (`ScriptCall::on_lock`): a suffix
//! changed here changes there too.

use std::fmt;

use redis::{RedisWrite, ToRedisArgs};
use sha2::{Digest, Sha256};

use super::packed::write_joined;

/// Escaped names longer than this are stored under `#` + the hex SHA-256 of the name.
const MAX_ESCAPED_LEN: usize = 200;

/// Escape `name`: `{`, `}`, `:`, `%`, `#`, spaces and control bytes become `%XX`. `#` is escaped so a
/// hashed name (which starts with `#`) can never equal an escaped one.
pub(crate) fn escape(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    push_escaped(&mut out, name);
    out
}

/// Whether `byte` is written as `%XX`. Every such byte is ASCII, so it never splits a UTF-8
/// character: the bytes between two of them are whole characters.
fn needs_escape(byte: u8) -> bool {
    matches!(
        byte,
        b'{' | b'}' | b':' | b'%' | b'#' | b' ' | 0..=0x1f | 0x7f
    )
}

/// The name `escaped` was made from (see [`escape`]); a hashed name stays as it is.
pub(crate) fn unescape(escaped: &str) -> String {
    let bytes = escaped.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut at = 0;
    while at < bytes.len() {
        let hex = escaped.get(at + 1..at + 3);
        match hex.and_then(|hex| u8::from_str_radix(hex, 16).ok()) {
            Some(byte) if bytes[at] == b'%' => {
                out.push(byte);
                at += 3;
            }
            _ => {
                out.push(bytes[at]);
                at += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Append `name`, escaped (see [`escape`]), to `out`.
fn push_escaped(out: &mut String, name: &str) {
    const HEX_UPPER: &[u8; 16] = b"0123456789ABCDEF";
    const HEX_LOWER: &[u8; 16] = b"0123456789abcdef";
    let start = out.len();
    let mut plain = 0;
    for (at, byte) in name.bytes().enumerate() {
        if needs_escape(byte) {
            out.push_str(&name[plain..at]);
            out.push('%');
            out.push(char::from(HEX_UPPER[usize::from(byte >> 4)]));
            out.push(char::from(HEX_UPPER[usize::from(byte & 0xf)]));
            plain = at + 1;
        }
    }
    out.push_str(&name[plain..]);
    if out.len() - start > MAX_ESCAPED_LEN {
        out.truncate(start);
        out.push('#');
        for byte in Sha256::digest(name.as_bytes()) {
            out.push(char::from(HEX_LOWER[usize::from(byte >> 4)]));
            out.push(char::from(HEX_LOWER[usize::from(byte & 0xf)]));
        }
    }
}

/// A key named after a lock: the lock's key, a suffix and an optional tail (a waiter's name). A
/// command takes it as one argument, written straight into the command: a script call names
/// three or four such keys, and none needs a string of its own.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Suffixed<'a> {
    lock: &'a str,
    suffix: &'static str,
    tail: &'a str,
}

impl ToRedisArgs for Suffixed<'_> {
    fn write_redis_args<W: ?Sized + RedisWrite>(&self, out: &mut W) {
        let parts = [self.lock, self.suffix, self.tail];
        write_joined(out, &parts.map(str::as_bytes));
    }
}

impl fmt::Display for Suffixed<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}{}", self.lock, self.suffix, self.tail)
    }
}

/// `lock` followed by `suffix`.
fn suffixed<'a>(lock: &'a str, suffix: &'static str) -> Suffixed<'a> {
    Suffixed {
        lock,
        suffix,
        tail: "",
    }
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
        let mut key = String::with_capacity(self.namespace.len() + name.len() + 3);
        key.push('{');
        key.push_str(&self.namespace);
        key.push(':');
        push_escaped(&mut key, name);
        key.push('}');
        key
    }

    /// The namespace, escaped.
    pub(crate) fn namespace(&self) -> &str {
        &self.namespace
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
pub(crate) fn waiters(lock: &str) -> Suffixed<'_> {
    suffixed(lock, ":w")
}

/// A fair lock's queue: a list of waiters in order of arrival. Its suffix is `:ql`, not `:q`: a
/// zset left at `:q` by an older release of the crate never expires, and list commands on it
/// would fail.
pub(crate) fn queue(lock: &str) -> Suffixed<'_> {
    suffixed(lock, ":ql")
}

/// A shared lock's queue (read/write locks and semaphores): waiters `<owner>|<n>|<kind>` in
/// order of arrival. A key of its own, so that no fair script ever grants to a shared waiter.
pub(crate) fn shared_queue(lock: &str) -> Suffixed<'_> {
    suffixed(lock, ":qs")
}

/// A shared lock's holders: a zset of owner ids by the expiry of their hold (server ms). The Lua
/// scripts build the same name in `renew.lua` and `heartbeat.lua`.
pub(crate) fn holders(lock: &str) -> Suffixed<'_> {
    suffixed(lock, ":s")
}

/// The queue a waiter (`<owner>|<n>`, or `<owner>|<n>|<kind>` for a shared lock) is in.
pub(crate) fn queue_of<'a>(lock: &'a str, waiter: &str) -> Suffixed<'a> {
    if crate::backend::shared_kind(waiter).is_some() {
        shared_queue(lock)
    } else {
        queue(lock)
    }
}

/// A queued fair waiter's heartbeat key: it lives while the waiter's manager heartbeats it (the Lua
/// scripts build the same name in `heartbeat_key`).
pub(crate) fn heartbeat<'a>(lock: &'a str, waiter: &'a str) -> Suffixed<'a> {
    Suffixed {
        lock,
        suffix: ":hb:",
        tail: waiter,
    }
}

/// The lock's fencing counter.
pub(crate) fn fence(lock: &str) -> Suffixed<'_> {
    suffixed(lock, ":f")
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
        assert!(waiters(&lock).to_string().starts_with(&lock));
        assert!(fence(&lock).to_string().starts_with(&lock));
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

    /// Escaping as a plain reading of its rule: character by character, then the hash.
    fn escape_by_the_rule(name: &str) -> String {
        let mut out = String::new();
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
            out = std::iter::once("#".to_owned())
                .chain(digest.iter().map(|byte| format!("{byte:02x}")))
                .collect();
        }
        out
    }

    #[test]
    fn escaping_follows_its_rule_for_every_kind_of_name() {
        for name in [
            "",
            "account:42",
            "plain",
            "%41",
            "#hash",
            "{tag}",
            "ключ:1 {ü} ✓",
            "tab\there\u{1f}\u{7f}\u{80}",
            &":".repeat(67),
            &":".repeat(66),
            &"ü".repeat(150),
            &"k".repeat(200),
            &"k".repeat(201),
        ] {
            assert_eq!(escape(name), escape_by_the_rule(name), "{name:?}");
            if name.len() <= 66 {
                assert_eq!(unescape(&escape(name)), name);
            }
        }
        let ks = KeySpace::new("ns");
        assert_eq!(ks.lock("a:b"), format!("{{ns:{}}}", escape("a:b")));
        assert_eq!(heartbeat("{ns:a}", "m:1").to_string(), "{ns:a}:hb:m:1");
        assert_eq!(queue("{ns:a}").to_string(), "{ns:a}:ql");
    }

    #[test]
    fn a_suffixed_key_goes_into_a_command_as_one_argument() {
        let mut cmd = redis::cmd("EVALSHA");
        cmd.arg(fence("{ns:a}"))
            .arg(heartbeat("{ns:a}", "m:1|2"))
            .arg("x");
        let args: Vec<Vec<u8>> = cmd
            .args_iter()
            .map(|arg| match arg {
                redis::Arg::Simple(bytes) => bytes.to_vec(),
                _ => Vec::new(),
            })
            .collect();
        let expected: [&[u8]; 4] = [b"EVALSHA", b"{ns:a}:f", b"{ns:a}:hb:m:1|2", b"x"];
        assert_eq!(args, expected);
    }
}
