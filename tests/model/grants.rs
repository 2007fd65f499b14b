//! A fair grant taken from its message, as src/manager/acquire.rs takes it: without asking the
//! server, while the grant's claim lease may not have run out, counted from the request's last
//! attempt that found the lock busy or its last heartbeat that found it queued (`take_grant`);
//! and a grant its ticket held before the request tried again is forgotten
//! (`drop_stale_grant`): a waiter frozen while granted, whose claim ran out and whose lock went
//! to another, must never take that grant when it resumes.

use crate::model::LockModel;
use crate::scripts::Acquired;
use crate::state::{Client, Phase, State};

impl LockModel {
    /// The acquire loop's turn with a grant in the ticket of `c`.
    pub(crate) fn take_grant(&self, s: &mut State, c: Client) {
        let now = s.client_now();
        let p = &mut s.procs[usize::from(c)];
        if p.busy_attempts > 1 && !self.cfg.defects.keep_stale_grant {
            // drop_stale_grant: the grant may be older than the last attempt, and reclaimed
            (p.grant, p.busy_attempts) = (None, 1);
            return;
        }
        let (Some(token), Phase::Fair { lease, .. }) = (p.grant.take(), p.phase.clone()) else {
            return;
        };
        let claim = self.cfg.eviction.min(lease);
        let since = p.since;
        // under takeover, its hold may be taken over a grace after `since` (the model credits
        // no earlier proof: an earlier deadline than the crate's)
        let taken_over = (self.cfg.takeover)
            .filter(|_| !self.cfg.defects.grant_past_takeover)
            .is_some_and(|grace| (since + grace).saturating_sub(self.cfg.drift) <= now);
        if since + claim <= now || taken_over {
            // its claim may have run out, or its hold been taken over: the next attempt asks
            p.busy_attempts = 1;
            return;
        }
        self.took(s, c, Acquired::Token(token), lease, true);
        // lost() fires when the claim may run out, until the watchdog extends it
        let p = &mut s.procs[usize::from(c)];
        p.deadline = since + claim;
        // its R is `since`: the inbox proves it only if subscribed before then
        (p.heard, p.proofs_count) = (since, p.since_subscribed);
    }
}

/// The bounds of the grants' check: the main check's, fair waiters taking grants from their
/// messages, one lease of two ticks (a claim of one tick runs out within the clock's bound).
pub fn grant_bounds() -> crate::model::Config {
    let mut cfg = crate::small();
    cfg.take_grants = true;
    cfg.leases = vec![2];
    cfg.dead_queue = false;
    cfg
}

#[test]
fn grants_taken_from_their_messages_keep_every_property() {
    crate::check_exhaustively(
        "grants from messages",
        LockModel {
            cfg: grant_bounds(),
        },
        crate::depth(),
    );
}

/// The waiter queues, is granted, and is frozen with the grant's message unread while its
/// claim runs out and the lock goes on; it tries again (busy), then reads the grant. Eight
/// steps: the search goes two levels past the exhaustive bound.
#[test]
fn a_stale_grant_kept_after_another_attempt_is_found() {
    use stateright::{Checker, HasDiscoveries, Model};
    let mut cfg = grant_bounds();
    cfg.defects.keep_stale_grant = true;
    let property = crate::properties::EXCLUSION;
    let checker = LockModel { cfg }
        .checker()
        .target_max_depth(crate::depth() + 2)
        .finish_when(HasDiscoveries::AnyOf([property].into()))
        .threads(2)
        .spawn_bfs()
        .join();
    let path = checker.discovery(property).expect("a stale grant taken");
    let steps = crate::trace::report(checker.model(), path, property, "keep_stale_grant");
    assert!(steps > 0);
}
