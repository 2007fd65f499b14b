//! Run-once jobs (`LockManager::run_once`) against real servers: every tick runs on exactly one
//! replica, with clock-skewed replicas, a job that outlives `at_most`, and a replica killed
//! mid-job. The test binary runs itself as that replica, so it has a plain `main`.

#[path = "../support/mod.rs"]
mod support;

mod handle;
mod killed;
mod once;
mod overrun;
mod refused;

use std::collections::BTreeMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, UNIX_EPOCH};

use tower_lock::{JobHandle, JobRun, JobSchedule, LockManager};

type Test = fn() -> Pin<Box<dyn std::future::Future<Output = ()>>>;

fn main() {
    if killed::is_child() {
        return killed::child();
    }
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let only = std::env::args().nth(1).filter(|arg| !arg.starts_with('-'));
    let chosen = |name: &&str| only.as_deref().is_none_or(|only| name.contains(only));
    let plain: Vec<_> = plain_tests()
        .into_iter()
        .filter(|(name, _)| chosen(name))
        .collect();
    let tests: Vec<_> = tests()
        .into_iter()
        .filter(|(name, _)| chosen(name))
        .collect();
    let count = plain.len() + tests.len();
    println!("\nrunning {count} tests");
    for (name, test) in plain {
        test();
        println!("test {name} ... ok");
    }
    for (name, test) in tests {
        runtime.block_on(test());
        println!("test {name} ... ok");
    }
    println!("\ntest result: ok. {count} passed; 0 failed\n");
}

/// The tests that run outside this binary's runtime: a schedule needs one and says so, and a
/// panic's log is read on a runtime of one thread.
fn plain_tests() -> Vec<(&'static str, fn())> {
    vec![
        (
            "a_schedule_outside_a_runtime_is_refused",
            refused::a_schedule_outside_a_runtime_is_refused,
        ),
        (
            "a_panicking_job_is_logged_and_the_schedule_goes_on",
            refused::a_panicking_job_is_logged_and_the_schedule_goes_on,
        ),
    ]
}

fn tests() -> Vec<(&'static str, Test)> {
    vec![
        ("bad_schedules_are_refused", || {
            Box::pin(refused::bad_schedules_are_refused())
        }),
        ("stop_lets_the_run_finish_and_dropping_cancels_it", || {
            Box::pin(handle::stop_lets_the_run_finish_and_dropping_cancels_it())
        }),
        ("a_shutdown_ends_the_schedule", || {
            Box::pin(handle::a_shutdown_ends_the_schedule())
        }),
        ("each_tick_runs_once_in_memory", || {
            Box::pin(once::each_tick_runs_once_in_memory())
        }),
        ("each_tick_runs_once_on_redis", || {
            Box::pin(once::each_tick_runs_once_on_redis())
        }),
        ("each_tick_runs_once_on_a_quorum", || {
            Box::pin(once::each_tick_runs_once_on_a_quorum())
        }),
        (
            "a_job_past_at_most_is_lost_and_the_next_tick_runs_elsewhere",
            || Box::pin(overrun::a_job_past_at_most_is_lost_and_the_next_tick_runs_elsewhere()),
        ),
        ("a_replica_killed_mid_job_does_not_stop_the_others", || {
            Box::pin(killed::a_replica_killed_mid_job_does_not_stop_the_others())
        }),
    ]
}

/// One run of a job, as the job saw it.
#[derive(Debug, Clone)]
pub struct Run {
    /// The tick's number: its time since the epoch divided by the period.
    pub tick: u64,
    /// The replica that ran it.
    pub replica: usize,
    pub token: u64,
    /// When the job started.
    pub started: Instant,
}

/// The runs of every replica of one test, in the order they started.
#[derive(Debug, Clone, Default)]
pub struct Runs(Arc<Mutex<Vec<Run>>>);

impl Runs {
    /// Record `run` of `replica`; returns the record.
    pub fn record(&self, run: &JobRun, period: Duration, replica: usize) -> Run {
        let record = Run {
            tick: tick_number(run, period),
            replica,
            token: run.fencing_token(),
            started: Instant::now(),
        };
        self.0.lock().unwrap().push(record.clone());
        record
    }

    pub fn all(&self) -> Vec<Run> {
        self.0.lock().unwrap().clone()
    }

    /// The runs of each tick.
    pub fn by_tick(&self) -> BTreeMap<u64, Vec<Run>> {
        let mut ticks: BTreeMap<u64, Vec<Run>> = BTreeMap::new();
        for run in self.all() {
            ticks.entry(run.tick).or_default().push(run);
        }
        ticks
    }
}

/// The number of `run`'s tick: replicas whose offsets are below the period agree on it.
pub fn tick_number(run: &JobRun, period: Duration) -> u64 {
    let since = run
        .tick()
        .duration_since(UNIX_EPOCH)
        .expect("after the epoch");
    (since.as_nanos() / period.as_nanos()) as u64
}

/// `replica`'s schedule of the job `name` on `manager`: each run is recorded in `runs`, then
/// lasts `work`.
pub fn recording(
    manager: &LockManager,
    name: &str,
    schedule: JobSchedule,
    replica: usize,
    runs: &Runs,
    work: Duration,
) -> JobHandle {
    let runs = runs.clone();
    let period = schedule.period_value();
    let job = move |run: JobRun| {
        runs.record(&run, period, replica);
        tokio::time::sleep(work)
    };
    manager.run_once(name, schedule, job).expect("schedule")
}
