//! The chaos run's modes: which locks the clients take, and on how many servers.

use tower_lock::LockOptions;

use crate::rng::Rng;
use crate::WAIT;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Mode {
    Exclusive,
    Uncohorted,
    Fair,
    ReadGroups,
    Quorum,
    /// Exclusive, with takeover of dead holders: killed holders pass on after the grace.
    Takeover,
    /// Fair, with takeover of dead holders.
    FairTakeover,
}

impl Mode {
    pub(crate) const ALL: [Mode; 7] = [
        Mode::Exclusive,
        Mode::Uncohorted,
        Mode::Fair,
        Mode::ReadGroups,
        Mode::Quorum,
        Mode::Takeover,
        Mode::FairTakeover,
    ];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Mode::Exclusive => "exclusive",
            Mode::Uncohorted => "uncohorted",
            Mode::Fair => "fair",
            Mode::ReadGroups => "read-groups",
            Mode::Quorum => "quorum",
            Mode::Takeover => "takeover",
            Mode::FairTakeover => "fair-takeover",
        }
    }

    pub(crate) fn parse(name: &str) -> Mode {
        Mode::ALL
            .into_iter()
            .find(|m| m.name() == name.trim())
            .unwrap_or_else(|| panic!("unknown chaos mode {name:?}"))
    }

    /// The options of the next acquisition; whether it is a read (which excludes writes only).
    pub(crate) fn options(self, rng: &mut Rng) -> (LockOptions, bool) {
        if self == Mode::ReadGroups && rng.below(4) != 0 {
            return (LockOptions::read().cohort_order().wait_timeout(WAIT), true);
        }
        (self.excluding().wait_timeout(WAIT), false)
    }

    /// The options of a hold that excludes every other of the mode.
    pub(crate) fn excluding(self) -> LockOptions {
        match self {
            Mode::Fair | Mode::FairTakeover => LockOptions::fair(),
            Mode::ReadGroups => LockOptions::write(),
            Mode::Exclusive | Mode::Uncohorted | Mode::Quorum | Mode::Takeover => {
                LockOptions::exclusive()
            }
        }
    }

    pub(crate) fn servers(self) -> usize {
        if self == Mode::Quorum {
            3
        } else {
            1
        }
    }
}
