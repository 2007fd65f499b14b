//! A hand-off in memory, and the proof it rests on.
//!
//! A hand-off gives the next request a token of the block the server reserved with the cohort's
//! hold, without asking the server. That is right only while the server still holds that hold: a
//! server that restarted (empty, or from an AOF or RDB that lost its last writes) forgot it, and
//! may have given the lock to another process since, under a token above the whole block. A drop
//! of this process's connections tells of a restart, but a partition hides the drop. So a
//! hand-off needs a positive proof: the server answered a call with the hold (the acquisition, a
//! renewal of the watchdog, or a confirmation asked for the hand-off) that began less than
//! [`PROOF`] ago. Without one, the releasing request asks for a confirmation (one read, no script,
//! one round trip) and hands off only if the server still holds the hold; else
//! the hold goes back to the server, and the next request takes the lock there.
//!
//! Hand-offs in a row within [`PROOF`] of a proof cost nothing more; a confirmation serves the
//! hand-offs of the next [`PROOF`]. What this rests on: a server does not come back from a restart
//! (or a failover) and grant the lock to another process within [`PROOF`] of answering this one.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{Cohort, Inheritance, Turn, Waiting, TOKEN_BLOCK};
use crate::lease::LostSignal;
use crate::manager::live::Hold;
use crate::manager::Shared;
use crate::sync::{seeded, Defect};

/// How long the server's answer with a hold serves as proof that it still holds it, for a
/// hand-off in memory (or a read group's new member). Far below the time a server takes to
/// restart, or a replica to be promoted.
pub(crate) const PROOF: Duration = Duration::from_millis(10);

/// Whether the hold of `lost` is proven recently enough to be handed on in memory.
pub(crate) fn proven(lost: &LostSignal) -> bool {
    let recent = |at: Instant| at.elapsed() < PROOF;
    !is_lost(lost) && lost.proven().is_some_and(recent)
}

/// Whether the lease of `lost` is lost: no hand-off of its hold (a seeded defect looks away).
fn is_lost(lost: &LostSignal) -> bool {
    lost.is_lost() && !seeded(Defect::HandOffLost)
}

/// What [`Cohort::hand_off`] did.
#[derive(Debug)]
pub(super) enum HandOff {
    /// The next request inherited the hold.
    Made,
    /// A request waits for it, but the hold is not proven recently: confirm it (the hold given),
    /// then release again.
    Unproven(Hold),
    /// Nobody got it: the hold goes back to the backend.
    None,
}

impl Cohort {
    /// Hand the lock to the first request still waiting, if the bound (when it counts for that
    /// request), the lease and the block of tokens allow, no connection dropped since the leader
    /// took the lock, and the hold is proven recently ([`proven`]; `may_confirm`: else ask for
    /// a confirmation).
    pub(super) fn hand_off(
        &mut self,
        shared: &Arc<Shared>,
        bound: u32,
        may_confirm: bool,
    ) -> HandOff {
        let Some(held) = &self.held else {
            return HandOff::None;
        };
        if shared.waiters.wake_alls() != self.connections && !seeded(Defect::DropIgnored) {
            return HandOff::None;
        }
        // the tokens of the backend's block: `held.token` and the ones after it
        let block_end = held.token + u64::from(TOKEN_BLOCK) - 1;
        let mut checked = false;
        while !is_lost(&held.lost) && self.last_token < block_end {
            let handoffs = self.handoffs;
            let next = self.waiting.front();
            if next.is_some_and(|next| next.bounded && handoffs >= bound) {
                return HandOff::None;
            }
            match next {
                None => return HandOff::None,
                Some(next) if next.turn.is_closed() => {
                    self.waiting.pop_front();
                    continue;
                }
                Some(_) if checked || proven(&held.lost) => checked = true,
                Some(_) if may_confirm => return HandOff::Unproven(held.clone()),
                Some(_) => return HandOff::None,
            }
            let Some(Waiting {
                owner,
                turn,
                bounded,
                ..
            }) = self.waiting.pop_front()
            else {
                return HandOff::None;
            };
            let token = self.last_token + 1;
            let inheritance = Inheritance {
                shared: shared.clone(),
                hold: Some(held.for_request(&owner)),
                token,
            };
            match turn.send(Turn::Inherit(inheritance)) {
                Ok(()) => {
                    self.handoffs += u32::from(bounded);
                    self.last_token = token;
                    self.holder = Some((owner, 1));
                    if !seeded(Defect::HandOffAndRelease) {
                        return HandOff::Made;
                    }
                }
                Err(unsent) => unsent.disarm(),
            }
        }
        HandOff::None
    }
}

impl Shared {
    /// Ask the server whether it still holds `hold`, a shared hold (one read, no script): a yes
    /// proves it; a no loses its lease, as a renewal that found it gone would; no answer proves
    /// nothing.
    pub(crate) async fn confirm_hold(&self, hold: &Hold) {
        let started = Instant::now();
        match self.holds(hold).await {
            Ok(true) => hold.lost.prove(started),
            Ok(false) => {
                let party = crate::backend::LockParty {
                    id: hold.id.clone(),
                    owner: hold.owner.as_arc().clone(),
                };
                (self.leases).record(&party, hold.token, Some(false), started, self.lease);
            }
            Err(err) => {
                let key = &*hold.key;
                tracing::debug!(key, error = %err, "could not confirm a shared hold");
            }
        }
    }

    /// Whether the backend still holds `hold`. Only a single server or cluster has cohorts and
    /// read groups; elsewhere nothing is proven.
    async fn holds(&self, hold: &Hold) -> Result<bool, crate::error::BoxError> {
        match &*self.backend {
            #[cfg(feature = "redis")]
            crate::backend::Backend::Redis(redis) => {
                redis.holds(&hold.id, hold.owner.as_arc()).await
            }
            _ => Ok(false),
        }
    }
}
