//! A replica killed mid-job: a child process (this test binary) runs the schedule and is
//! SIGKILLed while its job runs. The tick it ran is not run again; the other replicas go on with
//! later ticks, the lock passing on at the latest at `at_most`; over 100 ticks in all, every
//! tick runs once, none twice, but those the dead replica's hold spans.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use tower_lock::{JobRun, JobSchedule, LockManager};

use crate::support::{eventually, RedisServer, GENEROUS};
use crate::{recording, tick_number, Runs};

const CHILD_URL: &str = "TOWER_LOCK_JOB_CHILD_URL";
const PERIOD: Duration = Duration::from_millis(200);
const AT_MOST: Duration = Duration::from_millis(600);
/// Above the replicas' skews (40 and 80 ms).
const AT_LEAST: Duration = Duration::from_millis(150);
/// The ticks the test runs, the killed replica's among them.
const TICKS: u64 = 100;

/// The schedule of replica `skew`: every replica's ticks fall `skew` after the multiples of the
/// period, as if its clock were that much behind.
fn schedule(skew: u64) -> JobSchedule {
    (JobSchedule::every(PERIOD).offset(Duration::from_millis(skew)))
        .at_least(AT_LEAST)
        .at_most(AT_MOST)
}

/// Whether this process is the replica to be killed.
pub fn is_child() -> bool {
    std::env::var_os(CHILD_URL).is_some()
}

/// The replica to be killed: its ticks come first (no skew); its job says which tick it runs
/// and under which token, then runs until the process is killed (or the parent goes).
pub fn child() {
    let url = std::env::var(CHILD_URL).expect("child URL");
    std::thread::spawn(|| {
        let _ = std::io::stdin().read_line(&mut String::new());
        std::process::exit(0);
    });
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(async move {
        let manager = LockManager::redis(&url).await.expect("child manager");
        let job = |run: JobRun| async move {
            println!(
                "RUNNING {} {}",
                tick_number(&run, PERIOD),
                run.fencing_token()
            );
            std::future::pending::<()>().await;
        };
        let _handle = manager
            .run_once("report", schedule(0), job)
            .expect("schedule");
        std::future::pending::<()>().await;
    });
}

pub async fn a_replica_killed_mid_job_does_not_stop_the_others() {
    let server = RedisServer::start();
    let runs = Runs::default();
    let mut managers = Vec::new();
    let mut handles = Vec::new();
    for (replica, skew) in [(1, 40), (2, 80)] {
        let manager = LockManager::redis(&server.url()).await.expect("manager");
        let work = Duration::from_millis(10);
        handles.push(recording(
            &manager,
            "report",
            schedule(skew),
            replica,
            &runs,
            work,
        ));
        managers.push(manager);
    }
    let mut child = Command::new(std::env::current_exe().expect("test binary"))
        .env(CHILD_URL, server.url())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn the replica to kill");
    let stdout = child.stdout.take().expect("child stdout");
    let line = tokio::task::spawn_blocking(move || {
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line).map(|_| line)
    });
    let line = line.await.unwrap().expect("the child's run");
    child.kill().expect("SIGKILL the replica mid-job");
    child.wait().expect("reap");
    let killed = Instant::now();
    let mut words = line
        .split_whitespace()
        .skip(1)
        .map(|word| word.parse::<u64>());
    let (tick, token) = match (words.next(), words.next()) {
        (Some(Ok(tick)), Some(Ok(token))) => (tick, token),
        _ => panic!("the child said {line:?}"),
    };
    let later = |runs: &Runs| runs.all().into_iter().filter(move |run| run.tick > tick);
    let first_tick = runs.all().first().map_or(tick, |run| run.tick.min(tick));
    let until = Duration::from_millis(PERIOD.as_millis() as u64 * TICKS) + GENEROUS;
    let went_on = eventually(until, || {
        later(&runs).any(|run| run.tick >= first_tick + TICKS)
    })
    .await;
    for handle in handles {
        handle.stop().await;
    }
    assert!(
        went_on,
        "the others stopped after the kill: {:?}",
        runs.all()
    );
    let again: Vec<_> = runs
        .all()
        .into_iter()
        .filter(|run| run.tick == tick)
        .collect();
    assert!(again.is_empty(), "tick {tick} ran again: {again:?}");
    exactly_once(&runs, tick, first_tick);
    let first = later(&runs).min_by_key(|run| run.started).unwrap();
    assert!(
        first.token > token,
        "{first:?} after the child's token {token}"
    );
    // the lock passed on by at_most after the child took it, and the next tick took it then
    let waited = first.started - killed;
    let bound = AT_MOST + PERIOD + Duration::from_millis(500);
    assert!(
        waited <= bound,
        "the next run started {waited:?} after the kill"
    );
    for manager in managers {
        manager.shutdown().await.expect("shutdown");
    }
}

/// Every tick from `first` on ran once, none twice, except the killed replica's `tick` (it ran
/// there) and those its hold spans until `at_most` (nobody could take the lock).
fn exactly_once(runs: &Runs, tick: u64, first: u64) {
    let by_tick = runs.by_tick();
    let twice: Vec<_> = by_tick.iter().filter(|(_, runs)| runs.len() > 1).collect();
    assert!(twice.is_empty(), "ticks that ran twice: {twice:?}");
    let spanned = tick..=tick + (AT_MOST.as_millis() / PERIOD.as_millis()) as u64;
    let last = *by_tick.keys().last().expect("runs");
    let missed: Vec<_> = (first..=last)
        .filter(|t| !spanned.contains(t) && !by_tick.contains_key(t))
        .collect();
    assert!(missed.is_empty(), "ticks nobody ran: {missed:?}");
    assert!(last - first >= TICKS, "{} ticks", last - first);
}
