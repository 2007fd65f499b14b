//! The builder's takeover of dead holders: the grace, its bounds, and the manager id that carries
//! it to every probe (DESIGN.md, "Dead holders").

use std::sync::Arc;
use std::time::Duration;

use super::{LockManagerBuilder, Target};
use crate::backend::{drift, Wiring};
use crate::background::BackgroundQueue;
use crate::error::LockError;
use crate::inbox_proof::InboxProof;
use crate::manager::new_manager_id;

/// The takeover grace a manager on Redis (one server, Sentinel, a cluster or a quorum) has by default: a
/// killed holder's lock passes on within 2 s (BENCHMARKS.md, "Dead holders": a grace of 1 s came too
/// close), and a live holder's inbox has 750 ms to prove itself, which three PINGs share.
pub const DEFAULT_TAKEOVER_GRACE: Duration = Duration::from_millis(750);

/// The shortest takeover grace: the inbox PINGs three times per grace while it holds locks.
const MIN_GRACE: Duration = Duration::from_millis(100);

/// The longest takeover grace: past an hour the lease ends a dead holder's locks first anyway.
const MAX_GRACE: Duration = Duration::from_secs(3600);

/// The builder's choice of takeover.
#[derive(Debug, Clone, Copy)]
pub(super) enum Takeover {
    /// On with [`DEFAULT_TAKEOVER_GRACE`] where the backend supports it, else off.
    Default,
    /// On with this grace; refused where the backend does not support it.
    Grace(Duration),
    /// Off.
    Off,
}

impl LockManagerBuilder {
    /// Let other managers end this manager's holds (every mode) once its process has been seen
    /// dead for `grace` (default: [`DEFAULT_TAKEOVER_GRACE`] on Redis: one server, Sentinel, a
    /// cluster or a quorum).
    ///
    /// A process that dies closes its connections, and Redis sees its inbox go at once. A waiting
    /// manager that sees it missing twice, `grace` apart, with no renewal between, ends the hold
    /// as a release would. A live holder whose inbox connection went away learns first: its
    /// guard's `lost()` fires one grace (less the drift allowance) after its inbox last proved
    /// itself, unless it reconnects and renews before. So a Redis that leaves the inbox's PING
    /// unanswered for about the grace (a stall, a failover) loses the holds older than a third
    /// of it: a longer grace rides out longer stalls, and passes a dead holder's locks on later.
    /// While a hold is older than a third of the grace, the manager PINGs its inbox that often.
    /// Only managers with a grace probe holders: give every manager of a namespace the same.
    /// On a quorum, each master judges its own part of a hold, and the holder's `lost()` fires
    /// once fewer than a majority of the masters that granted it have its inbox proven there:
    /// one master down or stalled loses nothing. On a cluster, each slot's channel proves itself
    /// by echo (see the guide's "Dead holders"). From 100 ms to 1 h; [`build`](Self::build)
    /// refuses it on memory with [`LockError::Config`].
    pub fn takeover_grace(mut self, grace: Duration) -> Self {
        self.takeover = Takeover::Grace(grace);
        self
    }

    /// Let other managers end this manager's holds once its process has been seen dead for
    /// [`DEFAULT_TAKEOVER_GRACE`] (750 ms), and refuse a backend that cannot (see
    /// [`takeover_grace`](Self::takeover_grace)).
    ///
    /// The default already does so on Redis. Asking for it explicitly makes an in-memory
    /// manager, which has no other process to take over from, an error instead.
    pub fn takeover(self) -> Self {
        self.takeover_grace(DEFAULT_TAKEOVER_GRACE)
    }

    /// Turn the takeover of dead holders off: every hold lasts until it is released or its
    /// lease runs out.
    ///
    /// A holder then never counts its locks lost while Redis stalls for less than its lease.
    pub fn no_takeover(mut self) -> Self {
        self.takeover = Takeover::Off;
        self
    }

    /// Whether the backend built can take dead holders' holds over.
    fn takes_over(&self) -> bool {
        match self.target {
            #[cfg(feature = "redis")]
            Target::Redis(_) | Target::RedisPool(..) | Target::Sentinel(..) => true,
            // each master judges its own part of a hold; a majority decides (`quorum_proof.rs`)
            #[cfg(feature = "redis")]
            Target::Quorum(_) => true,
            // each slot's channel of the manager proves itself by echo (`cluster_proof.rs`)
            #[cfg(feature = "cluster")]
            Target::Cluster(_) => true,
            _ => false,
        }
    }

    /// `Ok` unless a takeover grace is out of bounds or the backend cannot take holds over.
    pub(super) fn check_takeover(&self) -> Result<(), LockError> {
        let Takeover::Grace(grace) = self.takeover else {
            return Ok(());
        };
        if grace < MIN_GRACE {
            return Err(LockError::Config(format!(
                "takeover grace {grace:?} is too short (at least {MIN_GRACE:?})"
            )));
        }
        if grace > MAX_GRACE {
            return Err(LockError::Config(format!(
                "takeover grace {grace:?} is too long (at most {MAX_GRACE:?})"
            )));
        }
        if !self.takes_over() {
            return Err(LockError::Config(
                "takeover of dead holders needs Redis (one server, Sentinel, a cluster or \
                 a quorum), not memory"
                    .to_owned(),
            ));
        }
        Ok(())
    }

    /// The grace the manager to build takes dead holders over after (`None`: never).
    fn grace(&self) -> Option<Duration> {
        match self.takeover {
            Takeover::Default => self.takes_over().then_some(DEFAULT_TAKEOVER_GRACE),
            Takeover::Grace(grace) => Some(grace),
            Takeover::Off => None,
        }
    }

    /// The wiring of the manager to build: its id names its takeover grace, if it has one.
    pub(super) fn wiring(&self) -> (Wiring, BackgroundQueue) {
        let Some(grace) = self.grace() else {
            return Wiring::new(new_manager_id());
        };
        let (mut wiring, queue) = Wiring::new(manager_id_with_grace(grace));
        wiring.inbox_proof = Arc::new(InboxProof::new(Some((grace, drift(grace)))));
        (wiring, queue)
    }
}

/// A new manager id that carries the takeover grace in milliseconds: `<uuid>g<ms>`. Probes read
/// the holder's own grace from it (`takeover.lua`), never their own.
fn manager_id_with_grace(grace: Duration) -> Arc<str> {
    let ms = grace.as_millis();
    Arc::from(format!("{}g{ms}", new_manager_id()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::LockManager;

    #[test]
    fn a_grace_out_of_bounds_or_without_redis_is_refused() {
        let refused = |builder: LockManagerBuilder| match builder.check_takeover() {
            Err(LockError::Config(why)) => why,
            other => panic!("expected a refusal, got {other:?}"),
        };
        let zero = LockManager::builder().redis("redis://127.0.0.1:1");
        assert!(refused(zero.takeover_grace(Duration::ZERO)).contains("too short"));
        let huge = LockManager::builder().redis("redis://127.0.0.1:1");
        assert!(refused(huge.takeover_grace(Duration::MAX)).contains("too long"));
        let memory = LockManager::builder().takeover_grace(Duration::from_secs(1));
        assert!(refused(memory).contains("not memory"));
        let off = LockManager::builder().takeover_grace(Duration::from_secs(1));
        assert!(off.no_takeover().check_takeover().is_ok());
    }

    #[test]
    fn takeover_is_on_by_default_where_the_backend_supports_it() {
        let redis = LockManager::builder().redis("redis://127.0.0.1:1");
        assert_eq!(redis.grace(), Some(DEFAULT_TAKEOVER_GRACE));
        let sentinel = LockManager::builder().sentinel(["redis://127.0.0.1:1"], "m");
        assert_eq!(sentinel.grace(), Some(DEFAULT_TAKEOVER_GRACE));
        let off = LockManager::builder()
            .redis("redis://127.0.0.1:1")
            .no_takeover();
        assert_eq!(off.grace(), None);
        let quorum = LockManager::builder().quorum(["redis://a:1", "redis://b:1", "redis://c:1"]);
        assert!(quorum.check_takeover().is_ok());
        assert_eq!(quorum.grace(), Some(DEFAULT_TAKEOVER_GRACE));
        let asked = LockManager::builder().quorum(["redis://a:1", "redis://b:1", "redis://c:1"]);
        assert!(asked.takeover().check_takeover().is_ok());
        assert_eq!(LockManager::builder().grace(), None);
    }

    #[cfg(feature = "cluster")]
    #[test]
    fn a_cluster_takes_over_by_default() {
        let cluster = LockManager::builder().cluster(["redis://127.0.0.1:1"]);
        assert_eq!(cluster.grace(), Some(DEFAULT_TAKEOVER_GRACE));
        let asked = LockManager::builder().cluster(["redis://127.0.0.1:1"]);
        assert!(asked.takeover().check_takeover().is_ok());
        let off = LockManager::builder().cluster(["redis://127.0.0.1:1"]);
        assert_eq!(off.no_takeover().grace(), None);
    }

    #[test]
    fn the_manager_id_names_the_grace() {
        let id = manager_id_with_grace(Duration::from_millis(1500));
        assert!(id.ends_with("g1500"), "{id}");
        assert!(!id.contains(':') && !id.contains('|'));
    }
}
