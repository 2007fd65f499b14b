//! The `tower_lock_oldest_wait_seconds` gauge: the age of the oldest request of this process
//! waiting for a lock, per mode, so that an alert can fire on a request that waited too long.
//!
//! # Implementation notes
//!
//! No request pays for it: each waiting request already carries the moment it began (a field
//! copied where it registers), and the watchdog's slow tick (every 500 ms) reads them. Gauges of
//! the `metrics` facade are process-wide, so each manager keeps its row here and the gauge shows
//! the oldest wait of any manager of the process.

use std::time::Instant;

use super::Mode;

/// The modes the gauge is labelled with, by slot (see [`OldestWaits::note`]).
const MODES: usize = 5;

/// The slot of `mode`.
fn slot(mode: Mode) -> usize {
    match mode {
        Mode::Exclusive => 0,
        Mode::Fair => 1,
        Mode::Read => 2,
        Mode::Write => 3,
        Mode::Semaphore(_) => 4,
    }
}

/// The oldest wait in each mode among the requests of one manager, gathered at one tick.
#[derive(Debug, Default)]
pub(crate) struct OldestWaits {
    since: [Option<Instant>; MODES],
}

impl OldestWaits {
    /// A request waiting in `mode` since `since`.
    pub(crate) fn note(&mut self, mode: Mode, since: Instant) {
        let oldest = &mut self.since[slot(mode)];
        *oldest = Some(oldest.map_or(since, |o| o.min(since)));
    }
}

/// One manager's row of the process-wide gauge; dropped with the manager's watchdog, which
/// takes the row away.
#[derive(Debug)]
pub(crate) struct OldestWaitGauge {
    #[cfg(feature = "metrics")]
    row: u64,
}

#[cfg(feature = "metrics")]
mod rows {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::{Mutex, MutexGuard};
    use std::time::Duration;

    use super::{Mode, MODES};

    /// The labels of the slots.
    const LABELS: [Mode; MODES] = [
        Mode::Exclusive,
        Mode::Fair,
        Mode::Read,
        Mode::Write,
        Mode::Semaphore(1),
    ];

    /// Every manager's oldest waits, and which modes the gauge was ever set for (a mode that
    /// never waited stays absent from the scrape; one that waited falls back to 0).
    #[derive(Default)]
    struct Rows {
        rows: Vec<(u64, [Duration; MODES])>,
        shown: [bool; MODES],
    }

    static ROWS: Mutex<Rows> = Mutex::new(Rows {
        rows: Vec::new(),
        shown: [false; MODES],
    });
    static NEXT_ROW: AtomicU64 = AtomicU64::new(0);

    fn rows() -> MutexGuard<'static, Rows> {
        ROWS.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(super) fn new_row() -> u64 {
        NEXT_ROW.fetch_add(1, Ordering::Relaxed)
    }

    /// Set `row` to `ages` (`None`: take it away), and the gauge to the oldest of every row.
    pub(super) fn publish(row: u64, ages: Option<[Duration; MODES]>) {
        let mut table = rows();
        table.rows.retain(|(r, _)| *r != row);
        if let Some(ages) = ages {
            table.rows.push((row, ages));
        }
        for (i, mode) in LABELS.iter().enumerate() {
            let oldest = table.rows.iter().map(|(_, ages)| ages[i]).max();
            let oldest = oldest.unwrap_or_default();
            if oldest.is_zero() && !table.shown[i] {
                continue;
            }
            table.shown[i] = true;
            metrics::gauge!("tower_lock_oldest_wait_seconds", "mode" => mode.name())
                .set(oldest.as_secs_f64());
        }
    }
}

impl OldestWaitGauge {
    pub(crate) fn new() -> Self {
        OldestWaitGauge {
            #[cfg(feature = "metrics")]
            row: rows::new_row(),
        }
    }

    /// Show `waits`, gathered now, as this manager's oldest waits.
    pub(crate) fn publish(&self, _waits: &OldestWaits) {
        #[cfg(feature = "metrics")]
        {
            let now = Instant::now();
            let age = |since: Option<Instant>| since.map_or(Default::default(), |s| now - s);
            rows::publish(self.row, Some(_waits.since.map(age)));
        }
    }
}

impl Drop for OldestWaitGauge {
    fn drop(&mut self) {
        #[cfg(feature = "metrics")]
        rows::publish(self.row, None);
    }
}
