//! Runs the schedule checks of the in-process hand-offs under shuttle, and plants their seeded
//! defects.
//!
//! Each check is a scenario: a few tasks that drive the real cohorts, read groups, wait registry
//! or link (built on shuttle's locks and atomics, `sync.rs`) against a small model of the server,
//! and assert their invariants as they go. [`explore`] runs it under two schedulers with fixed
//! seeds: PCT (probabilistic concurrency testing: few preemptions at chosen points, good at
//! ordering bugs) and uniformly random switching. Shuttle samples schedules; it does not
//! enumerate them all, so a pass is evidence, not proof. [`finds`] plants one defect
//! (`crate::sync::seeded`) and asserts that the checker fails.
//!
//! - `manager::schedules::cohort`: no double holder, no hand-off of a lost hold, every token given
//!   once, no hand-off after a connection dropped, every request served. Defects: `HandOffLost`,
//!   `HandOffAndRelease`, `DropIgnored`.
//! - `manager::schedules::read_group`: no read beside a write, no join of a lost group, every read
//!   served. Defect: `JoinLost`.
//! - `waiters::schedules`: every waiter that stays is woken (no wake-up lost), none left
//!   registered. Defect: `WakeKept`.
//! - `backend::redis::link::schedules`: every answer to its own caller, every settle called once,
//!   every caller failed when the connection closes. Defect: `AnswerOutOfTurn`.
//!
//! Each check's module says what it covers and what it leaves out.
//!
//! Implementation notes: the schedules per scheduler come from `SCHEDULES_ITERATIONS` (1000 by
//! default). A failure prints the failing schedule; `shuttle::replay(scenario, "<schedule>")` in
//! a test runs it again, step by step.

use std::cell::Cell;
use std::panic::{self, AssertUnwindSafe};

use shuttle::scheduler::{PctScheduler, RandomScheduler};
use shuttle::{Config, Runner};

use crate::sync::{plant, Defect};

/// The seed of both schedulers: a run explores the same schedules every time.
const SEED: u64 = 0x7077_e71c;

/// Preemptions PCT places in one iteration.
const PCT_DEPTH: usize = 3;

thread_local! {
    /// The scheduler running, and the schedules it ran so far.
    static RUNNING: Cell<(&'static str, usize)> = const { Cell::new(("", 0)) };
}

/// Iterations per scheduler.
fn iterations() -> usize {
    let asked = std::env::var("SCHEDULES_ITERATIONS").ok();
    asked.and_then(|n| n.parse().ok()).unwrap_or(1000)
}

/// Run `scenario` under PCT, then under random switching, `iterations()` schedules each.
pub(crate) fn explore(scenario: fn()) {
    let n = iterations();
    let counted = move || {
        RUNNING.set((RUNNING.get().0, RUNNING.get().1 + 1));
        scenario();
    };
    RUNNING.set(("PCT", 0));
    let pct = PctScheduler::new_from_seed(SEED, PCT_DEPTH, n);
    Runner::new(pct, Config::default()).run(counted);
    RUNNING.set(("random", 0));
    let random = RandomScheduler::new_from_seed(SEED, n);
    Runner::new(random, Config::default()).run(counted);
}

/// Plant `defect`, explore `scenario`, and return what the checker failed with (it must fail).
pub(crate) fn finds(defect: Defect, scenario: fn()) -> String {
    plant(Some(defect));
    let outcome = panic::catch_unwind(AssertUnwindSafe(|| explore(scenario)));
    plant(None);
    let Err(failure) = outcome else {
        panic!("the checker did not find the planted {defect:?}");
    };
    let text = failure.downcast_ref::<String>().cloned();
    let text = text.or_else(|| failure.downcast_ref::<&str>().map(|s| (*s).to_owned()));
    let (scheduler, schedules) = RUNNING.get();
    eprintln!("{defect:?} found by the {scheduler} scheduler in schedule {schedules}");
    text.unwrap_or_default()
}
