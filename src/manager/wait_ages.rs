//! The ages of the oldest requests of one manager waiting in each mode, gathered at the
//! watchdog's slow tick for the `tower_lock_oldest_wait_seconds` gauge (see
//! `telemetry/oldest_wait.rs`): from the local waiters, the cohorts and the read groups, which
//! each note when a request began as it queues, so that no acquisition pays more.

use std::sync::Arc;

use super::cohort::Cohorts;
use super::read_group::ReadGroups;
use crate::options::Mode;
use crate::telemetry::{OldestWaitGauge, OldestWaits};
use crate::waiters::WaitRegistry;
use crate::watchdog::WaitAges;

/// What the watchdog calls at its slow tick to set the oldest waits of the manager whose
/// waiters, cohorts and read groups these are (nothing without the `metrics` feature).
pub(super) fn wait_age_report(
    waiters: Arc<WaitRegistry>,
    cohorts: Arc<Cohorts>,
    read_groups: Arc<ReadGroups>,
) -> WaitAges {
    if !cfg!(feature = "metrics") {
        return WaitAges(Box::new(|| {}));
    }
    let gauge = OldestWaitGauge::new();
    WaitAges(Box::new(move || {
        let mut oldest = OldestWaits::default();
        waiters.for_each_wait(|wait| oldest.note(wait.mode, wait.since));
        cohorts.for_each_wait(|wait| oldest.note(wait.mode, wait.since));
        read_groups.for_each_wait(|since| oldest.note(Mode::Read, since));
        gauge.publish(&oldest);
    }))
}
