//! What the takeover of dead holders asks of a backend (DESIGN.md, "Dead holders"): probes of
//! the holders that local requests wait for, and what a hold's takeover deadline counts on.

use std::sync::Arc;
use std::time::Duration;

use super::{Backend, LockParty};
use crate::error::BoxError;
use crate::ids::OwnerId;
use crate::inbox_proof::InboxProof;
use crate::quorum_proof::QuorumWatch;
use crate::waiters::LockId;

impl Backend {
    /// Probe the holders of the locks of `batch` for death, ending the holds of those dead for
    /// their grace (DESIGN.md, "Dead holders"). Returns in how long a marked holder may be taken
    /// over at the earliest (`None`: no marked holder left). On a quorum every master probes its
    /// own part of each hold; on a cluster, each slot's locks are probed in a call of their own.
    /// Memory managers have nothing to probe.
    pub(crate) async fn probe_holders(
        &self,
        batch: &[LockId],
    ) -> Result<Option<Duration>, BoxError> {
        match self {
            #[cfg(feature = "redis")]
            Backend::Redis(r) => r.probe_holders(batch).await,
            #[cfg(feature = "redis")]
            Backend::Quorum(q) => q.probe_holders(batch).await,
            Backend::Memory(_) => Ok(None),
        }
    }

    /// The takeover watch of the quorum hold of `owner` on `id` under `token`: a majority of its
    /// masters' proofs (see [`QuorumWatch`]). `None` on the other backends, whose holds count on
    /// the manager's one inbox, and when takeover is off.
    pub(crate) fn quorum_watch(
        &self,
        id: &LockId,
        owner: &OwnerId,
        token: u64,
    ) -> Option<Arc<QuorumWatch>> {
        match self {
            #[cfg(feature = "redis")]
            Backend::Quorum(q) => {
                let lock = LockParty {
                    id: id.clone(),
                    owner: owner.as_arc().clone(),
                };
                q.takeover_watch(&lock, token)
            }
            _ => None,
        }
    }

    /// The proofs a hold of `id` counts on when they are not the manager's one inbox's: on a
    /// cluster, those of the channel of the lock's slot. `None` on the other backends.
    #[cfg_attr(not(feature = "cluster"), allow(unused_variables))]
    pub(crate) fn slot_proof(&self, id: &LockId) -> Option<Arc<InboxProof>> {
        match self {
            #[cfg(feature = "cluster")]
            Backend::Redis(r) => r.slot_proof(id),
            _ => None,
        }
    }
}
