//! The inbox channels of a manager, as the scripts address them: one channel per manager on a
//! standalone server, `{N}:inbox:<manager>`; on a cluster one per manager and slot,
//! `{<tag of the slot>}:inbox:<manager>`, so that a script publishes in the slot of the lock it
//! runs on and the message stays on the shard that owns that slot.

use std::borrow::Cow;

use super::names::KeySpace;
#[cfg(feature = "cluster")]
use super::slots::{slot, SlotTags};

/// How scripts name a manager's inbox channel.
#[derive(Debug)]
pub(crate) enum Channels {
    /// One channel per manager: the prefix every manager id is appended to.
    Fixed(String),
    /// One channel per manager and cluster slot.
    #[cfg(feature = "cluster")]
    PerSlot(SlotTags),
}

impl Channels {
    pub(crate) fn fixed(keys: &KeySpace) -> Self {
        Channels::Fixed(keys.inbox_prefix())
    }

    #[cfg(feature = "cluster")]
    pub(crate) fn per_slot(keys: &KeySpace) -> Self {
        Channels::PerSlot(SlotTags::new(keys.namespace()))
    }

    /// What a script run on `lock` prepends to a manager id to reach that manager's inbox.
    #[cfg_attr(not(feature = "cluster"), allow(unused_variables))]
    pub(crate) fn prefix(&self, lock: &str) -> Cow<'_, str> {
        match self {
            Channels::Fixed(prefix) => Cow::Borrowed(prefix),
            #[cfg(feature = "cluster")]
            Channels::PerSlot(tags) => Cow::Owned(slot_prefix(tags, slot(lock))),
        }
    }

    /// The channel of `manager` that scripts run on the locks of `slot` publish to (a cluster).
    #[cfg(feature = "cluster")]
    pub(crate) fn of_slot(&self, slot: u16, manager: &str) -> String {
        match self {
            Channels::Fixed(prefix) => format!("{prefix}{manager}"),
            Channels::PerSlot(tags) => format!("{}{manager}", slot_prefix(tags, slot)),
        }
    }
}

impl Channels {
    /// The indices of `ids` in groups whose locks share a cluster slot (one script call may only
    /// touch one slot); on a standalone server, one group of them all.
    pub(crate) fn group_by_slot<'a>(&self, ids: impl Iterator<Item = &'a str>) -> Vec<Vec<usize>> {
        match self {
            Channels::Fixed(_) => vec![ids.enumerate().map(|(i, _)| i).collect()],
            #[cfg(feature = "cluster")]
            Channels::PerSlot(_) => {
                let mut groups: Vec<(u16, Vec<usize>)> = Vec::new();
                for (i, id) in ids.enumerate() {
                    let s = slot(id);
                    match groups.iter_mut().find(|(at, _)| *at == s) {
                        Some((_, group)) => group.push(i),
                        None => groups.push((s, vec![i])),
                    }
                }
                groups.into_iter().map(|(_, group)| group).collect()
            }
        }
    }
}

#[cfg(feature = "cluster")]
fn slot_prefix(tags: &SlotTags, slot: u16) -> String {
    format!("{{{}}}:inbox:", tags.tag(slot))
}

#[cfg(all(test, feature = "cluster"))]
mod tests {
    use super::*;

    #[test]
    fn a_clusters_channel_lives_in_the_slot_of_its_lock() {
        let keys = KeySpace::new("ns");
        let lock = keys.lock("account:42");
        let channels = Channels::per_slot(&keys);
        let channel = format!("{}m1", channels.prefix(&lock));
        assert_eq!(slot(&channel), slot(&lock));
        assert_eq!(channel, channels.of_slot(slot(&lock), "m1"));
        assert!(channel.starts_with("{ns~"), "{channel}");
        let fixed = Channels::fixed(&keys);
        assert_eq!(fixed.prefix(&lock), "{ns}:inbox:");
        let (a, b) = (keys.lock("a"), keys.lock("b"));
        let ids = [a.as_str(), b.as_str(), a.as_str()];
        assert_eq!(fixed.group_by_slot(ids.into_iter()), [vec![0, 1, 2]]);
        assert_eq!(
            channels.group_by_slot(ids.into_iter()),
            [vec![0, 2], vec![1]]
        );
    }
}
