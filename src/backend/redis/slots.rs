//! Redis Cluster slots: which slot a key hashes to (CRC16 of its hash tag, modulo 16384), and a
//! tag of each slot for the inbox channels, so that a script can publish to a manager's channel in
//! the very slot of the lock it runs on (sharded pub/sub: the message stays on that shard).

/// Slots of a Redis Cluster.
pub(crate) const SLOTS: u16 = 16384;

/// CRC16-XMODEM (polynomial 0x1021, initial 0), Redis Cluster's key hash.
fn crc16(bytes: &[u8]) -> u16 {
    bytes.iter().fold(0u16, |crc, &byte| {
        (0..8).fold(crc ^ (u16::from(byte) << 8), |crc, _| {
            if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            }
        })
    })
}

/// The slot of `key`: the CRC16 of its hash tag (the text between its first `{` and the next `}`,
/// when not empty), else of the whole key.
pub(crate) fn slot(key: &str) -> u16 {
    let tagged = key.find('{').and_then(|open| {
        let rest = &key[open + 1..];
        let close = rest.find('}')?;
        (close > 0).then(|| &rest[..close])
    });
    crc16(tagged.unwrap_or(key).as_bytes()) % SLOTS
}

/// For each slot, a hash tag `<namespace>~<n>` that hashes to it: the inbox channel of slot S is
/// `{<tag of S>}:inbox:<manager>`. Found by counting n up from 0 (about 170,000 hashes of short
/// names: a few milliseconds, once per manager).
#[derive(Debug)]
pub(crate) struct SlotTags {
    tags: Vec<String>,
}

impl SlotTags {
    pub(crate) fn new(namespace: &str) -> Self {
        let mut tags = vec![String::new(); usize::from(SLOTS)];
        let mut left = tags.len();
        let mut n = 0u64;
        while left > 0 {
            let tag = format!("{namespace}~{n}");
            let at = usize::from(crc16(tag.as_bytes()) % SLOTS);
            if tags[at].is_empty() {
                tags[at] = tag;
                left -= 1;
            }
            n += 1;
        }
        SlotTags { tags }
    }

    /// The tag of `slot`.
    pub(crate) fn tag(&self, slot: u16) -> &str {
        &self.tags[usize::from(slot % SLOTS)]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_redis_clusters() {
        // the values CLUSTER KEYSLOT gives
        assert_eq!(slot("foo"), 12182);
        assert_eq!(slot("{user1000}.following"), slot("{user1000}.followers"));
        assert_eq!(slot("{user1000}.following"), slot("user1000"));
        assert_eq!(slot("foo{}{bar}"), crc16(b"foo{}{bar}") % SLOTS);
        assert_eq!(slot("{tower-lock:a}:q"), slot("tower-lock:a"));
    }

    #[test]
    fn every_slot_has_a_tag_that_hashes_to_it() {
        let tags = SlotTags::new("tower-lock");
        for s in [0, 1, 777, 12182, SLOTS - 1] {
            let tag = tags.tag(s);
            assert!(tag.starts_with("tower-lock~"), "{tag}");
            assert_eq!(slot(&format!("{{{tag}}}:inbox:m")), s);
        }
    }
}
