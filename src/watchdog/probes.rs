//! The probe round: while requests of this manager wait, the holders of the locks they wait for
//! are probed for death once a second, and again as soon as a missing holder's grace is up
//! (DESIGN.md, "Dead holders"). One script call per batch of locks; nothing while nobody waits.

use std::sync::Arc;
use std::time::Duration;

use futures_util::future::join_all;

use crate::backend::{Backend, OutageLog};
use crate::waiters::WaitRegistry;

/// How often the holders are probed while requests wait.
pub(super) const PROBE_EVERY: Duration = Duration::from_secs(1);

/// The round, as the outage log names it.
const PROBES: &str = "holder probes";

/// How many times one round comes back for a missing holder: a round never runs away, and the
/// next tick carries on.
const FOLLOW_UPS: usize = 3;

/// Past the moment the server said a hold may end: the server's clock decides, and a probe that
/// comes a little early only finds a few milliseconds left.
const SLACK: Duration = Duration::from_millis(5);

/// One probe round: every lock local requests wait for, in batches sent at once; then, if a
/// holder was found missing, again when its grace is up.
pub(super) async fn probe_all(
    backend: Arc<Backend>,
    waiters: Arc<WaitRegistry>,
    outages: Arc<OutageLog>,
) {
    for _ in 0..=FOLLOW_UPS {
        let locks = waiters.locks();
        if locks.is_empty() {
            return;
        }
        let batches =
            (locks.chunks(backend.renew_batch_size())).map(|batch| backend.probe_holders(batch));
        let mut soonest: Option<Duration> = None;
        for result in join_all(batches).await {
            match result {
                Ok(Some(due)) => soonest = Some(soonest.map_or(due, |s| s.min(due))),
                Ok(None) => {}
                Err(err) => {
                    let err = format!("holder probe failed for {} locks: {err}", locks.len());
                    outages.failed(PROBES, &err);
                    return;
                }
            }
        }
        outages.answered(PROBES);
        let Some(due) = soonest else {
            return;
        };
        tokio::time::sleep(due.saturating_add(SLACK)).await;
    }
}
