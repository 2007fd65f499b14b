//! How a schedule ends: `stop` lets the run in progress finish, dropping the handle cancels it,
//! and the manager's shutdown ends every schedule.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tower_lock::{JobRun, JobSchedule, LockManager, LockOptions};

use crate::support::{eventually, GENEROUS};
use crate::{recording, Runs};

const PERIOD: Duration = Duration::from_millis(100);
/// How long each run works: past the next ticks.
const WORK: Duration = Duration::from_millis(300);

/// Whether a run started, and whether it finished.
#[derive(Default, Clone)]
struct Progress {
    started: Arc<AtomicBool>,
    finished: Arc<AtomicBool>,
}

/// A schedule of "report" whose first run works [`WORK`], telling `progress`.
fn schedule_work(manager: &LockManager, progress: &Progress) -> tower_lock::JobHandle {
    let progress = progress.clone();
    let schedule = (JobSchedule::every(PERIOD))
        .at_least(PERIOD / 2)
        .at_most(GENEROUS);
    let job = move |_: JobRun| {
        let progress = progress.clone();
        async move {
            if !progress.started.swap(true, Ordering::SeqCst) {
                tokio::time::sleep(WORK).await;
                progress.finished.store(true, Ordering::SeqCst);
            }
        }
    };
    manager.run_once("report", schedule, job).expect("schedule")
}

async fn is_free(manager: &LockManager) -> bool {
    let free = manager
        .try_acquire("report", &LockOptions::exclusive())
        .await;
    free.expect("memory").is_some()
}

pub async fn stop_lets_the_run_finish_and_dropping_cancels_it() {
    let manager = LockManager::memory();
    let stopped = Progress::default();
    let handle = schedule_work(&manager, &stopped);
    assert!(eventually(GENEROUS, || stopped.started.load(Ordering::SeqCst)).await);
    handle.stop().await;
    assert!(
        stopped.finished.load(Ordering::SeqCst),
        "stop cancelled the run"
    );
    assert!(
        is_free(&manager).await,
        "the lock outlived the stopped schedule"
    );

    let dropped = Progress::default();
    let handle = schedule_work(&manager, &dropped);
    assert!(eventually(GENEROUS, || dropped.started.load(Ordering::SeqCst)).await);
    drop(handle);
    let mut free = false;
    for _ in 0..(GENEROUS.as_millis() / 5) {
        if is_free(&manager).await {
            free = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(free, "the lock outlived the dropped schedule");
    // the run would have finished by now, had it not been cancelled
    tokio::time::sleep(WORK * 2).await;
    assert!(
        !dropped.finished.load(Ordering::SeqCst),
        "the run outlived its schedule"
    );
}

/// A manager's shutdown ends its schedules, between runs and during one (the job is cancelled:
/// the shutdown released its lock).
pub async fn a_shutdown_ends_the_schedule() {
    let manager = LockManager::memory();
    let runs = Runs::default();
    let idle = recording(
        &manager,
        "idle",
        JobSchedule::every(GENEROUS * 100),
        0,
        &runs,
        PERIOD,
    );
    let busy = recording(
        &manager,
        "busy",
        JobSchedule::every(PERIOD),
        1,
        &runs,
        GENEROUS * 100,
    );
    assert!(eventually(GENEROUS, || !runs.all().is_empty()).await);
    manager.shutdown().await.expect("shutdown");
    let ended = eventually(GENEROUS, || idle.is_finished() && busy.is_finished()).await;
    assert!(ended, "a schedule outlived its manager");
}
