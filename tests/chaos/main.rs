//! The chaos test: three client processes (this binary, run again as a child) × 32 tasks contend
//! for 4 locks, in exclusive (each process handing locks on between its tasks in memory: lock
//! cohorting, the default), uncohorted (exclusive, every hold through Redis), fair, read-groups
//! (reads of one read/write lock with `cohort_order`, each process's reads sharing read holds,
//! and one write in four), quorum (3 masters), and takeover (exclusive and fair, with the takeover
//! of dead holders: a killed holder's locks pass on after 300 ms) modes, while a seeded fault schedule
//! kills Redis connections, restarts Redis (empty, from an RDB snapshot, from an `everysec` AOF cut
//! back by its last second), freezes Redis or a client process, kills a client process (and starts
//! a new one in its place), and cuts, delays or partitions a client from Redis or from one quorum
//! master (each client reaches each server through a proxy of its own). Every critical
//! section writes its fencing token to PostgreSQL, which refuses a token lower than the stored
//! one, and logs its start, end and lost signal. `check.rs` reads the logs at the end.
//!
//! The modes run at once, each in a process of its own (`apart.rs`). `CHAOS_SECONDS` (default 40)
//! sets each mode's duration, `CHAOS_SEED` replays a fault schedule, `CHAOS_MODES` (e.g.
//! `fair,quorum`) runs only some modes, `DATABASE_URL` names the PostgreSQL server (default
//! `postgres://postgres@127.0.0.1:5432/postgres`).

#[path = "../support/mod.rs"]
mod support;

mod apart;
mod check;
mod client;
mod faults;
mod flood;
mod mode;
mod rng;

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use mode::Mode;
use rng::Rng;
use support::proxy::Proxy;
use support::{RedisServer, Reply};
use tower_lock::{LockError, LockManager};

/// Set in a client process's environment: the index of the client.
const CLIENT_ENV: &str = "CHAOS_CLIENT";
const CLIENTS: usize = 3;
const TASKS: usize = 32;
const KEYS: usize = 4;
/// Short, so that the faults (pauses, partitions) outlast leases within the time budget.
const LEASE: Duration = Duration::from_secs(2);
const EVICTION: Duration = Duration::from_secs(1);
/// The takeover modes' grace: well inside the lease, so that a killed holder's locks pass on
/// by takeover, not by expiry.
const TAKEOVER_GRACE: Duration = Duration::from_millis(300);
const COMMAND_TIMEOUT: Duration = Duration::from_millis(500);
const NODE_TIMEOUT: Duration = Duration::from_millis(300);
const WAIT: Duration = Duration::from_secs(5);
/// How much longer than its wait timeout an acquire may take (a loaded 2-core machine).
const LATE_MARGIN: Duration = Duration::from_secs(2);
const DEFAULT_SECONDS: u64 = 40;

/// Wall-clock time in ns (CLOCK_REALTIME): one clock for every process of the machine.
fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970")
        .as_nanos() as u64
}

/// A manager as every process of the test builds it.
async fn manager(mode: Mode, urls: &[String]) -> Result<LockManager, LockError> {
    let builder = LockManager::builder()
        .lease(LEASE)
        .fair_eviction(EVICTION)
        .command_timeout(COMMAND_TIMEOUT);
    match mode {
        Mode::Quorum => builder.quorum(urls).node_timeout(NODE_TIMEOUT),
        Mode::Uncohorted => builder.redis(&urls[0]).local_handoffs(0),
        Mode::Exclusive | Mode::Fair | Mode::ReadGroups => builder.redis(&urls[0]),
        Mode::Takeover | Mode::FairTakeover => {
            builder.redis(&urls[0]).takeover_grace(TAKEOVER_GRACE)
        }
    }
    .build()
    .await
}

fn database_url() -> String {
    std::env::var("DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".to_owned())
}

async fn postgres() -> tokio_postgres::Client {
    let url = database_url();
    let (db, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .unwrap_or_else(|e| panic!("the chaos test needs PostgreSQL at {url} (DATABASE_URL): {e}"));
    tokio::spawn(connection);
    db
}

fn main() {
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    if let Ok(urls) = std::env::var(flood::FLOOD_ENV) {
        runtime.block_on(flood::run(&urls));
        return;
    }
    if let Ok(index) = std::env::var(CLIENT_ENV) {
        runtime.block_on(client::run(index.parse().expect("client index")));
        // lingering background work (a release in flight) must not keep the process
        std::process::exit(0);
    }
    let seconds = std::env::var("CHAOS_SECONDS")
        .map(|s| s.parse().expect("CHAOS_SECONDS: a number of seconds"))
        .unwrap_or(DEFAULT_SECONDS);
    let seed = std::env::var("CHAOS_SEED")
        .map(|s| s.parse().expect("CHAOS_SEED: a u64"))
        .unwrap_or_else(|_| now_ns() % 1_000_000_007);
    let modes: Vec<Mode> = std::env::var("CHAOS_MODES")
        .map(|s| s.split(',').map(Mode::parse).collect())
        .unwrap_or_else(|_| Mode::ALL.to_vec());
    println!("\nchaos seed: {seed} (replay with CHAOS_SEED={seed}), {seconds} s per mode");
    let began = Instant::now();
    let failed = if modes.len() > 1 {
        apart::run_each(&modes, seed, seconds)
    } else {
        (modes.into_iter())
            .filter(|&mode| !run_checked(&runtime, mode, seconds, seed))
            .map(Mode::name)
            .collect()
    };
    println!("chaos: {:.0?} in all, seed {seed}", began.elapsed());
    assert!(
        failed.is_empty(),
        "chaos seed {seed}: {} mode(s) failed: {failed:?}",
        failed.len(),
    );
}

/// Runs `mode` for `seconds` with its schedule of `seed` and prints its verdict; true when it
/// passed.
fn run_checked(runtime: &tokio::runtime::Runtime, mode: Mode, seconds: u64, seed: u64) -> bool {
    // each mode's schedule depends only on the seed and the mode
    let mode_seed = Rng::new(seed ^ (mode as u64 + 1) << 32).next_u64();
    let problems = run(runtime, mode, Duration::from_secs(seconds), mode_seed);
    if problems.is_empty() {
        println!("test chaos_{} ... ok", mode.name());
        return true;
    }
    println!("test chaos_{} ... FAILED", mode.name());
    for p in &problems {
        println!("  {p}");
    }
    false
}

/// One mode's run: servers, proxies, clients, the fault schedule, then the checks. Returns the
/// problems found.
fn run(runtime: &tokio::runtime::Runtime, mode: Mode, length: Duration, seed: u64) -> Vec<String> {
    let began = Instant::now();
    println!(
        "\n== chaos {}: {CLIENTS} clients × {TASKS} tasks, {KEYS} keys, lease {LEASE:?}, {length:?}",
        mode.name()
    );
    let table = format!(
        "chaos_{}_{}",
        std::process::id(),
        mode.name().replace('-', "_")
    );
    let db = runtime.block_on(async {
        let db = postgres().await;
        db.batch_execute(&format!(
            "DROP TABLE IF EXISTS {table};
             CREATE TABLE {table} (id INT PRIMARY KEY, token BIGINT NOT NULL, writes BIGINT NOT NULL);
             INSERT INTO {table} SELECT i, 0, 0 FROM generate_series(0, {}) AS i;",
            KEYS - 1
        ))
        .await
        .expect("create the table");
        db
    });
    let mut servers: Vec<RedisServer> = (0..mode.servers()).map(|_| RedisServer::start()).collect();
    let proxies: Vec<Vec<Proxy>> = (0..CLIENTS)
        .map(|_| servers.iter().map(|s| Proxy::start(s.port())).collect())
        .collect();
    let logs_dir = std::env::temp_dir().join(format!(
        "tower-lock-chaos-{}-{}",
        std::process::id(),
        mode.name()
    ));
    let _ = std::fs::remove_dir_all(&logs_dir);
    std::fs::create_dir_all(&logs_dir).expect("log dir");
    let until = now_ns() + length.as_nanos() as u64;
    // client i's n-th process (a killed client is started again) logs to client-i-n.log
    let mut logs: Vec<PathBuf> = Vec::new();
    let mut clients: Vec<(usize, Child)> = Vec::new();
    let mut spawn = |i: usize| -> u32 {
        let log = logs_dir.join(format!("client-{i}-{}.log", logs.len()));
        let urls: Vec<String> = proxies[i].iter().map(Proxy::url).collect();
        let child = Command::new(std::env::current_exe().expect("test binary"))
            .env(CLIENT_ENV, i.to_string())
            .env("CHAOS_MODE", mode.name())
            .env("CHAOS_URLS", urls.join(","))
            .env("CHAOS_UNTIL", until.to_string())
            .env("CHAOS_LOG", &log)
            .env("CHAOS_TABLE", &table)
            .env(
                "CHAOS_TASK_SEED",
                (seed ^ (i + logs.len() * CLIENTS) as u64).to_string(),
            )
            .env("DATABASE_URL", database_url())
            // the client exits when this end closes: a failed run leaves no process behind
            .stdin(Stdio::piped())
            .spawn()
            .expect("spawn a client process");
        let pid = child.id();
        logs.push(log);
        clients.push((i, child));
        pid
    };
    let pids: Vec<u32> = (0..CLIENTS).map(&mut spawn).collect();
    let mut processes = faults::Clients {
        pids,
        respawn: &mut spawn,
    };
    let faults = faults::run(&mut servers, &proxies, &mut processes, mode, (seed, until));
    drop(processes);
    let kills = (faults.iter())
        .filter(|f| f.kind == faults::Kind::KillClient)
        .count();

    // every task ends its last acquire (≤ wait timeout) and hold, then the client reports
    let patience = Instant::now() + WAIT + Duration::from_secs(20);
    let mut unfinished = Vec::new();
    for (i, child) in clients.iter_mut() {
        let i = *i;
        let exited =
            support::wait_until(patience.saturating_duration_since(Instant::now()), || {
                matches!(child.try_wait(), Ok(Some(_)))
            });
        if !exited {
            unfinished.push(i);
            let _ = child.kill();
            let _ = child.wait();
        }
    }
    let mut logs: Vec<check::ClientLog> = logs.iter().map(|p| check::ClientLog::read(p)).collect();
    // a process replaced after a kill never reports its tasks
    for n in 0..logs.len() {
        logs[n].killed = logs[n + 1..]
            .iter()
            .any(|later| later.client == logs[n].client);
    }
    let mut report = check::check(&logs, &faults);
    for i in unfinished {
        report
            .problems
            .push(format!("client {i} did not exit; killed"));
    }

    // after the faults: every key is acquirable by a fresh manager, within a bound
    let urls: Vec<String> = servers.iter().map(RedisServer::url).collect();
    let bound = LEASE + EVICTION + Duration::from_secs(2);
    let slowest = runtime.block_on(async {
        let m = manager(mode, &urls).await.expect("a fresh manager");
        let mut slowest = Duration::ZERO;
        for key in 0..KEYS {
            let started = Instant::now();
            let opts = mode.excluding().wait_timeout(bound);
            match m.acquire(&format!("chaos-{key}"), &opts).await {
                Ok(guard) => {
                    slowest = slowest.max(started.elapsed());
                    let _ = guard.release().await;
                }
                Err(e) => report.problems.push(format!(
                    "key chaos-{key} not acquirable after the faults: {e}"
                )),
            }
        }
        slowest
    });
    // no key of the crate's lives for ever
    let mut keys = 0;
    let mut immortal = Vec::new();
    for server in &servers {
        let mut cursor = "0".to_owned();
        loop {
            let reply = server.cmd(&["SCAN", &cursor, "COUNT", "1000"]);
            let parts = reply.as_array().expect("SCAN reply");
            cursor = parts[0].as_string().expect("SCAN cursor");
            for key in parts[1].as_strings().expect("SCAN keys") {
                keys += 1;
                if server.cmd(&["PTTL", &key]) == Reply::Int(-1) {
                    immortal.push(key);
                }
            }
            if cursor == "0" {
                break;
            }
        }
    }
    if !immortal.is_empty() {
        report
            .problems
            .push(format!("keys without an expiry: {immortal:?}"));
    }
    let (stored_writes, _) = runtime.block_on(async {
        let row = db
            .query_one(&format!("SELECT sum(writes)::BIGINT FROM {table}"), &[])
            .await
            .expect("sum of writes");
        let _ = db.batch_execute(&format!("DROP TABLE {table}")).await;
        (row.get::<_, i64>(0), ())
    });
    // a killed client's holds in progress may have written without logging: up to a task's each
    let unlogged = kills * TASKS;
    let stored = stored_writes as usize;
    if report.failed_writes == 0
        && !(report.accepted..=report.accepted + unlogged).contains(&stored)
    {
        report.problems.push(format!(
            "PostgreSQL counted {stored_writes} accepted writes, the logs {} ({kills} clients killed)",
            report.accepted
        ));
    }

    println!("faults: {}", faults::summary(&faults));
    report.print();
    println!(
        "after the faults: every key acquired by a fresh manager within {slowest:.1?} (bound {bound:?}); \
         {keys} keys in Redis, {} without an expiry",
        immortal.len()
    );
    println!("{} done in {:.1?}", mode.name(), began.elapsed());
    if report.problems.is_empty() {
        let _ = std::fs::remove_dir_all(&logs_dir);
    } else {
        println!("client logs kept in {}", logs_dir.display());
    }
    report.problems
}
