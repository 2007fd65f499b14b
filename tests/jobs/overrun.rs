//! A job that outlives `at_most`: its `lost()` fires at about `at_most`, and the next tick runs on
//! another replica under a higher token, while the first job still runs.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tower_lock::{JobRun, JobSchedule, LockManager};

use crate::support::{eventually, RedisServer, GENEROUS};
use crate::Runs;

const PERIOD: Duration = Duration::from_millis(400);
const AT_MOST: Duration = Duration::from_millis(250);
const AT_LEAST: Duration = Duration::from_millis(100);
/// How long the overrunning job goes on after its `lost()` fired: past the next tick.
const OVERRUN: Duration = Duration::from_millis(700);

pub async fn a_job_past_at_most_is_lost_and_the_next_tick_runs_elsewhere() {
    let server = RedisServer::start();
    let runs = Runs::default();
    let overran = Arc::new(AtomicBool::new(false));
    let lost_after = Arc::new(std::sync::Mutex::new(None));
    let mut handles = Vec::new();
    let mut managers = Vec::new();
    for (replica, skew) in [0, 40, 80].into_iter().enumerate() {
        let manager = LockManager::redis(&server.url()).await.expect("manager");
        let schedule = (JobSchedule::every(PERIOD).offset(Duration::from_millis(skew)))
            .at_least(AT_LEAST)
            .at_most(AT_MOST);
        let (runs, overran, lost_after) = (runs.clone(), overran.clone(), lost_after.clone());
        let job = move |run: JobRun| {
            let record = runs.record(&run, PERIOD, replica);
            let first = !overran.swap(true, Ordering::SeqCst);
            let lost_after = lost_after.clone();
            async move {
                if first {
                    run.lost().await;
                    *lost_after.lock().unwrap() = Some((record, Instant::now()));
                    tokio::time::sleep(OVERRUN).await;
                }
            }
        };
        handles.push(manager.run_once("report", schedule, job).expect("schedule"));
        managers.push(manager);
    }
    let next_ran = eventually(GENEROUS, || {
        let first = lost_after.lock().unwrap().clone();
        first.is_some_and(|(first, _)| runs.all().iter().any(|run| run.tick == first.tick + 1))
    })
    .await;
    let (first, lost_at) = lost_after.lock().unwrap().clone().expect("a run overran");
    assert!(
        next_ran,
        "the tick after the overrun never ran: {:?}",
        runs.all()
    );
    // about at_most: the hold counts from the attempt, a little before the job's start
    let lost_in = lost_at - first.started;
    let margin = Duration::from_millis(150);
    assert!(
        lost_in <= AT_MOST + margin && lost_in + margin >= AT_MOST,
        "lost() fired {lost_in:?} after the run's start; at_most is {AT_MOST:?}"
    );
    let next = (runs.all().into_iter())
        .find(|run| run.tick == first.tick + 1)
        .unwrap();
    assert_ne!(
        next.replica, first.replica,
        "the overrunning replica ran the next tick"
    );
    assert!(next.token > first.token, "{next:?} after {first:?}");
    // the overrunning job was let run past its lost(): it is still running
    assert!(
        next.started < lost_at + OVERRUN,
        "{next:?} ran after the overrun ended"
    );
    for handle in handles {
        handle.stop().await;
    }
    for manager in managers {
        manager.shutdown().await.expect("shutdown");
    }
}
