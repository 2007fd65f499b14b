//! Exactly once per tick: three replicas whose clocks are skewed by 0, 40 and 80 ms (their
//! offsets), with `at_least` above the skew; every tick runs on one of them, none twice, and the
//! fencing tokens rise from tick to tick.

use std::time::Duration;

use tower_lock::{JobSchedule, LockManager};

use crate::support::masters::Masters;
use crate::support::{eventually, RedisServer};
use crate::{recording, Runs};

const PERIOD: Duration = Duration::from_millis(200);
const SKEWS: [Duration; 3] = [
    Duration::ZERO,
    Duration::from_millis(40),
    Duration::from_millis(80),
];
const AT_LEAST: Duration = Duration::from_millis(150);
const AT_MOST: Duration = Duration::from_millis(180);
/// How long each run works: well within `at_least`.
const WORK: Duration = Duration::from_millis(10);

/// Three "replicas" sharing one in-memory manager, as the requests of one process would.
pub async fn each_tick_runs_once_in_memory() {
    let manager = LockManager::memory();
    each_tick_runs_once(vec![manager.clone(), manager.clone(), manager], 100).await;
}

/// Three managers on one redis-server.
pub async fn each_tick_runs_once_on_redis() {
    let server = RedisServer::start();
    let mut managers = Vec::new();
    for _ in 0..3 {
        managers.push(LockManager::redis(&server.url()).await.expect("manager"));
    }
    each_tick_runs_once(managers, 100).await;
}

/// Three managers on a quorum of three masters, over fewer ticks.
pub async fn each_tick_runs_once_on_a_quorum() {
    let masters = Masters::start(3);
    let mut managers = Vec::new();
    for _ in 0..3 {
        managers.push(masters.manager(Duration::from_secs(10)).await);
    }
    each_tick_runs_once(managers, 30).await;
}

/// Run the job on `managers` (one skew each) until `ticks` ticks ran, then check each ran once.
async fn each_tick_runs_once(managers: Vec<LockManager>, ticks: usize) {
    let runs = Runs::default();
    let handles: Vec<_> = (managers.iter().zip(SKEWS).enumerate())
        .map(|(replica, (manager, skew))| {
            let schedule = (JobSchedule::every(PERIOD).offset(skew))
                .at_least(AT_LEAST)
                .at_most(AT_MOST);
            recording(manager, "report", schedule, replica, &runs, WORK)
        })
        .collect();
    let within = PERIOD * (ticks as u32 + 10) * 3;
    let ran = eventually(within, || runs.by_tick().len() > ticks).await;
    for handle in handles {
        handle.stop().await;
    }
    assert!(ran, "{} ticks ran in {within:?}", runs.by_tick().len());
    let by_tick = runs.by_tick();
    let twice: Vec<_> = by_tick.values().filter(|runs| runs.len() > 1).collect();
    assert!(twice.is_empty(), "ticks run twice: {twice:?}");
    let (first, last) = (
        by_tick.keys().next().unwrap(),
        by_tick.keys().last().unwrap(),
    );
    assert_eq!(
        by_tick.len() as u64,
        last - first + 1,
        "ticks skipped between {first} and {last}: {:?}",
        by_tick.keys().collect::<Vec<_>>()
    );
    let tokens: Vec<u64> = by_tick.values().map(|runs| runs[0].token).collect();
    assert!(
        tokens.windows(2).all(|pair| pair[0] < pair[1]),
        "tokens out of order: {tokens:?}"
    );
    for manager in managers {
        manager.shutdown().await.expect("shutdown");
    }
}
