//! Background work on three replicas in one process: one leads a scheduler, a run-once job runs
//! once per tick on whichever replica takes it, and transfers between two accounts take both
//! locks at once. Against its own redis-server (or `REDIS_URL`).
//!
//! ```text
//! cargo run --release --example jobs
//! ```
//!
//! It prints who leads and each term, which replica ran each tick with its fencing token, and the
//! transfers' balances; halfway, the leader resigns and the next replica in line leads under a
//! higher term.

#[path = "../tests/support/mod.rs"]
mod support;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tower_lock::{JobRun, JobSchedule, LockError, LockManager, LockOptions};

const REPLICAS: [&str; 3] = ["replica-a", "replica-b", "replica-c"];
const RUN_FOR: Duration = Duration::from_secs(4);

#[tokio::main]
async fn main() -> Result<(), LockError> {
    let (url, _server) = match std::env::var("REDIS_URL") {
        Ok(url) => (url, None),
        Err(_) => {
            let server = support::RedisServer::start();
            (server.url(), Some(server))
        }
    };
    let mut replicas = Vec::new();
    for label in REPLICAS {
        let builder = LockManager::builder().redis(&url).label(label);
        replicas.push((label, builder.build().await?));
    }
    let balances = Arc::new(Mutex::new(HashMap::from([
        ("acct:1", 100),
        ("acct:2", 100),
    ])));

    let mut work = Vec::new();
    for &(label, ref manager) in &replicas {
        work.push(tokio::spawn(lead(label, manager.clone())));
        let job = manager.run_once("report", report_schedule(), move |run| report(label, run))?;
        work.push(tokio::spawn(async move {
            tokio::time::sleep(RUN_FOR).await;
            job.stop().await;
            Ok(())
        }));
        work.push(tokio::spawn(transfers(manager.clone(), balances.clone())));
    }
    for task in work {
        task.await.expect("a replica's task")?;
    }
    let balances = balances.lock().unwrap().clone();
    let total: i64 = balances.values().sum();
    println!("balances {balances:?}: total {total} (200 before: nothing lost)");
    for (_, manager) in replicas {
        manager.shutdown().await?;
    }
    Ok(())
}

/// A tick every 500 ms; a run holds the lock at least 300 ms (above any skew between these
/// replicas' clocks) and at most 400 ms.
fn report_schedule() -> JobSchedule {
    JobSchedule::every(Duration::from_millis(500))
        .at_least(Duration::from_millis(300))
        .at_most(Duration::from_millis(400))
}

/// The run-once job: say which replica ran the tick, under which token.
async fn report(label: &'static str, run: JobRun) {
    let tick = run.tick().duration_since(UNIX_EPOCH).unwrap_or_default();
    let token = run.fencing_token();
    println!(
        "tick {:>6} ms: report on {label}, token {token}",
        tick.as_millis() % 1_000_000
    );
}

/// Campaign for the scheduler; the first leader resigns halfway so that the next in line leads.
async fn lead(label: &str, manager: LockManager) -> Result<(), LockError> {
    let campaign = manager.campaign("scheduler");
    let Ok(leadership) = tokio::time::timeout(RUN_FOR, campaign).await else {
        return Ok(()); // never elected within the run
    };
    let leadership = leadership?;
    println!("{label} leads the scheduler, term {}", leadership.term());
    tokio::select! {
        _ = leadership.lost() => println!("{label} lost the leadership"),
        _ = tokio::time::sleep(RUN_FOR / 2) => {
            println!("{label} resigns");
            leadership.resign().await?;
        }
    }
    Ok(())
}

/// Move money between the two accounts for the whole run, both locks taken together.
async fn transfers(
    manager: LockManager,
    balances: Arc<Mutex<HashMap<&'static str, i64>>>,
) -> Result<(), LockError> {
    let until = SystemTime::now() + RUN_FOR;
    let mut moved = 0;
    while SystemTime::now() < until {
        let (from, to) = if moved % 2 == 0 {
            ("acct:1", "acct:2")
        } else {
            ("acct:2", "acct:1")
        };
        let owner = manager.owner();
        let both = owner
            .acquire_all([from, to], &LockOptions::exclusive())
            .await?;
        // read, think, write: without both locks, two replicas would lose updates here
        let (a, b) = {
            let balances = balances.lock().unwrap();
            (balances[from], balances[to])
        };
        tokio::time::sleep(Duration::from_millis(5)).await;
        {
            let mut balances = balances.lock().unwrap();
            balances.insert(from, a - 1);
            balances.insert(to, b + 1);
        }
        both.release().await?;
        moved += 1;
    }
    Ok(())
}
