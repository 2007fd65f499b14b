//! Schedules that cannot be meant are refused with a clear error; a job's panic is caught and
//! logged, and the schedule goes on.

use std::time::Duration;

use tower_lock::{JobRun, JobSchedule, KeyError, LockError, LockManager};

use crate::support::logs::{self, Warnings};
use crate::support::{eventually, GENEROUS};
use crate::Runs;

const PERIOD: Duration = Duration::from_millis(100);

fn nothing(_: JobRun) -> std::future::Ready<()> {
    std::future::ready(())
}

/// The reason `schedule` is refused with.
fn refusal(manager: &LockManager, schedule: JobSchedule) -> String {
    match manager.run_once("report", schedule, nothing) {
        Err(LockError::InvalidJob { key, reason }) => {
            assert_eq!(key, "report");
            reason
        }
        other => panic!("{schedule:?} was not refused: {other:?}"),
    }
}

pub fn a_schedule_outside_a_runtime_is_refused() {
    let manager = LockManager::memory();
    let reason = refusal(&manager, JobSchedule::every(PERIOD));
    assert!(reason.contains("Tokio runtime"), "{reason}");
}

pub async fn bad_schedules_are_refused() {
    let manager = LockManager::memory();
    let every = JobSchedule::every(PERIOD);
    let reason = refusal(&manager, JobSchedule::every(Duration::ZERO));
    assert!(reason.contains("period is zero"), "{reason}");
    let reason = refusal(&manager, every.at_most(Duration::ZERO));
    assert!(reason.contains("at_most is zero"), "{reason}");
    let reason = refusal(&manager, every.at_most(PERIOD / 2).at_least(PERIOD));
    assert!(reason.contains("at_least") && reason.contains("longer than at_most"));
    let reason = refusal(&manager, every.at_most(PERIOD * 2).at_least(PERIOD));
    assert!(reason.contains("not shorter than the period"), "{reason}");
    let reason = refusal(&manager, every.offset(PERIOD));
    assert!(reason.contains("offset"), "{reason}");
    let empty = manager.run_once("", every, nothing);
    assert!(matches!(empty, Err(LockError::InvalidKey(KeyError::Empty))));
    // extremes saturate: a schedule of Duration::MAX is taken, and never ticks in this test
    let far = JobSchedule::every(Duration::MAX)
        .at_most(Duration::MAX)
        .at_least(Duration::MAX);
    let handle = manager.run_once("report", far, nothing).expect("saturated");
    assert!(!handle.is_finished());
    handle.stop().await;
    manager.shutdown().await.expect("shutdown");
    let closed = manager.run_once("report", every, nothing);
    assert!(matches!(closed, Err(LockError::Closed)), "{closed:?}");
}

/// A job that panics on its first run: the panic is caught and logged, its lock released, and
/// the next ticks run. On a runtime of one thread, whose logs this test reads.
pub fn a_panicking_job_is_logged_and_the_schedule_goes_on() {
    let (subscriber, warnings) = Warnings::and_errors();
    let _logs = logs::set_thread_default(subscriber);
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let payload = info.payload();
        let message = (payload.downcast_ref::<String>().map(String::as_str))
            .or_else(|| payload.downcast_ref::<&str>().copied());
        if message != Some(FIRST_RUN_PANICS) {
            default_hook(info);
        }
    }));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let manager = LockManager::memory();
        let runs = Runs::default();
        let recorded = runs.clone();
        let job = move |run: JobRun| {
            let first = recorded.all().is_empty();
            recorded.record(&run, PERIOD, 0);
            async move { assert!(!first, "{FIRST_RUN_PANICS}") }
        };
        let handle = manager.run_once("report", JobSchedule::every(PERIOD), job);
        let handle = handle.expect("schedule");
        let went_on = eventually(GENEROUS, || runs.all().len() >= 3).await;
        handle.stop().await;
        assert!(
            went_on,
            "the schedule stopped after a panic: {:?}",
            runs.all()
        );
        let free = manager.try_acquire("report", &Default::default()).await;
        assert!(free.expect("memory").is_some(), "the lock was kept");
    });
    let _ = std::panic::take_hook();
    let logged = warnings.lock().unwrap().clone();
    let panicked = |line: &String| line.contains("job=report") && line.contains(FIRST_RUN_PANICS);
    assert!(
        logged.iter().any(panicked),
        "the panic was not logged: {logged:?}"
    );
}

const FIRST_RUN_PANICS: &str = "the first run panics";
