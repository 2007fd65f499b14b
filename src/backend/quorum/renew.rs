//! Renewing a quorum manager's holds: every master at once, a lock kept where a majority renewed
//! it. Each master's renewal also counts on its own for the hold's takeover deadline
//! (`quorum_proof.rs`): it deleted the takeover mark there.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::stream::{FuturesUnordered, StreamExt};

use super::round::NodeCall;
use super::{bounded, QuorumBackend};
use crate::backend::LockParty;
use crate::error::BoxError;

impl QuorumBackend {
    /// Renew every lock of `batch` on every master: a lock is still held when a majority renewed it.
    /// The round ends as soon as every lock is decided (a frozen master must not delay the next
    /// round past the masters' expiry); the rest finishes in the background. When fewer than a
    /// majority answer, the round fails as a whole (the watchdog then counts the lease as not
    /// renewed, and loses it once a whole lease passed that way). Each master that renewed a
    /// hold, in the round or after it, moves that master's part of the hold's takeover deadline.
    pub(crate) async fn renew(
        &self,
        batch: &[LockParty],
        lease: Duration,
    ) -> Result<Vec<bool>, BoxError> {
        let (n, q) = (self.nodes.len(), self.quorum());
        let shared: Arc<[LockParty]> = Arc::from(batch);
        let suspect = self.suspects();
        let started = Instant::now();
        let mut rest: FuturesUnordered<NodeCall<Vec<bool>>> = (0..n)
            .map(|i| self.renew_on(i, shared.clone(), lease, started))
            .collect();
        let mut renewed = vec![0usize; batch.len()];
        let mut answers = Vec::with_capacity(n);
        let mut outstanding = vec![true; n];
        let mut ok = 0;
        while let Some((i, answer)) = rest.next().await {
            if let Ok(flags) = &answer {
                ok += 1;
                for (count, held) in renewed.iter_mut().zip(flags) {
                    *count += usize::from(*held);
                }
            }
            if let Some(flag) = outstanding.get_mut(i) {
                *flag = false;
            }
            answers.push((i, answer.map(drop)));
            // Done when every lock is decided, not waiting for masters that failed last time.
            let pending = rest.len();
            let live = (0..n).filter(|i| outstanding[*i] && !suspect[*i]).count();
            let decided = |pending: usize| renewed.iter().all(|r| *r >= q || r + pending < q);
            if ok + pending < q || (ok >= q && (decided(pending) || decided(live))) {
                break;
            }
        }
        self.drain(rest);
        if ok < q {
            return Err(self.down("renewal", &answers));
        }
        Ok(renewed.into_iter().map(|r| r >= q).collect())
    }

    /// The renewal of `batch` on master `i`, sent in a round begun at `started`: the holds it
    /// found there count as renewed on that master from `started`.
    fn renew_on(
        &self,
        i: usize,
        batch: Arc<[LockParty]>,
        lease: Duration,
        started: Instant,
    ) -> NodeCall<Vec<bool>> {
        let (redis, timeout) = (self.nodes[i].redis.clone(), self.node_timeout);
        let (up, watches) = (self.nodes[i].up.clone(), self.watches.clone());
        Box::pin(async move {
            let answer = bounded(timeout, &up, redis.renew(&batch, lease)).await;
            if let Ok(found) = &answer {
                let renewed = batch.iter().zip(found).filter(|(_, found)| **found);
                for (lock, _) in renewed {
                    watches.renewed(lock, i, started);
                }
            }
            (i, answer)
        })
    }
}
