//! What takeover of dead holders costs Redis while requests wait, against its own redis-server
//! (or `REDIS_URL`).
//!
//! ```text
//! cargo run --release --example takeover_cost
//! ```
//!
//! For 1, 100 and 10,000 requests, each waiting for its own lock held by another manager (both
//! live), the Redis commands per second with takeover on (the default grace) and off: first
//! while the holder alone holds (its inbox's PINGs), then what the waiting manager adds (its
//! probes); of those with takeover, the EVALSHAs and PINGs, and the milliseconds per second Redis
//! spent running scripts. Redis counts the commands a script runs among the commands it
//! processed. Last, the commands of one uncontended acquire and release, on and off.

#[path = "../tests/support/mod.rs"]
mod support;

use std::time::{Duration, Instant};

use redis::aio::MultiplexedConnection;
use tower_lock::{LockManager, LockOptions};

const GRACE: Duration = tower_lock::DEFAULT_TAKEOVER_GRACE;
const WINDOW: Duration = Duration::from_secs(3);
/// Uncontended acquire-and-release cycles counted.
const CYCLES: u64 = 2_000;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (url, _server) = match std::env::var("REDIS_URL") {
        Ok(url) => (url, None),
        Err(_) => {
            let server = support::RedisServer::start();
            (server.url(), Some(server))
        }
    };
    let mut conn = (redis::Client::open(url.as_str())?)
        .get_multiplexed_async_connection()
        .await?;
    println!("commands/s while locks are held, and added while requests wait ({WINDOW:?} windows)");
    println!(
        "{:>8} {:>8} {:>28} {:>28} {:>6} {:>6}",
        "waiting", "", "holding: all (evalsha, ping)", "waiting adds (evalsha, ping)", "", ""
    );
    for waiting in [1, 100, 10_000] {
        let on = rates(&url, &mut conn, waiting, true).await?;
        let off = rates(&url, &mut conn, waiting, false).await?;
        for (name, [holding, waited]) in [("on", on), ("off", off)] {
            let shown = |r: [f64; 4]| format!("{:.1} ({:.1}, {:.1})", r[0], r[1], r[2]);
            let script_ms = format!("{:.1}", waited[3]);
            println!(
                "{waiting:>8} {name:>8} {:>28} {:>28} script ms/s {script_ms}",
                shown(holding),
                shown(waited)
            );
        }
    }
    for takeover in [true, false] {
        let per_cycle = uncontended(&url, &mut conn, takeover).await?;
        println!("uncontended acquire + release, takeover {takeover}: {per_cycle:.2} commands");
    }
    Ok(())
}

/// The commands Redis processes per uncontended acquire and release of a lock whose hold
/// lasts a millisecond.
async fn uncontended(
    url: &str,
    conn: &mut MultiplexedConnection,
    takeover: bool,
) -> Result<f64, Box<dyn std::error::Error>> {
    let manager = builder(url, takeover).build().await?;
    let before = counts(conn).await?;
    for _ in 0..CYCLES {
        let guard = manager
            .acquire("cost:free", &LockOptions::exclusive())
            .await?;
        tokio::time::sleep(Duration::from_millis(1)).await;
        guard.release().await?;
    }
    let after = counts(conn).await?;
    manager.shutdown().await?;
    // the two INFO calls of this measurement are not the crate's
    Ok((after[0] - before[0] - 2) as f64 / CYCLES as f64)
}

fn builder(url: &str, takeover: bool) -> tower_lock::LockManagerBuilder {
    let builder = LockManager::builder().redis(url);
    match takeover {
        true => builder.takeover_grace(GRACE),
        false => builder.no_takeover(),
    }
}

/// Commands, EVALSHAs, PINGs per second and ms per second Redis spent running scripts: while
/// another manager holds `waiting` locks, and what `waiting` requests waiting for them add.
async fn rates(
    url: &str,
    conn: &mut MultiplexedConnection,
    waiting: usize,
    takeover: bool,
) -> Result<[[f64; 4]; 2], Box<dyn std::error::Error>> {
    let holder = builder(url, takeover).build().await?;
    let waiter = builder(url, takeover).build().await?;
    let mut held = Vec::with_capacity(waiting);
    for k in 0..waiting {
        let key = format!("cost:{k}");
        held.push(holder.acquire(&key, &LockOptions::exclusive()).await?);
    }
    // every hold is older than a third of the grace: the holder proves its inbox
    tokio::time::sleep(Duration::from_secs(1)).await;
    let holding = window(conn).await?;
    let mut tasks = Vec::with_capacity(waiting);
    for k in 0..waiting {
        let waiter = waiter.clone();
        tasks.push(tokio::spawn(async move {
            let key = format!("cost:{k}");
            drop(waiter.acquire(&key, &LockOptions::exclusive()).await);
        }));
    }
    let settle = Instant::now() + Duration::from_secs(60);
    while waiter.waiting() < waiting && Instant::now() < settle {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // every waiter made its attempt: what follows is what waiting costs
    tokio::time::sleep(Duration::from_secs(2)).await;
    let both = window(conn).await?;
    drop(held);
    for task in tasks {
        task.await?;
    }
    holder.shutdown().await?;
    waiter.shutdown().await?;
    let added = std::array::from_fn(|i| both[i] - holding[i]);
    Ok([holding, added])
}

/// Commands, EVALSHAs, PINGs per second and script ms per second over one [`WINDOW`].
async fn window(conn: &mut MultiplexedConnection) -> Result<[f64; 4], redis::RedisError> {
    let before = counts(conn).await?;
    tokio::time::sleep(WINDOW).await;
    let after = counts(conn).await?;
    let per_second = |i: usize| after[i].saturating_sub(before[i]) as f64 / WINDOW.as_secs_f64();
    // the two INFO calls of this measurement are not the crate's
    Ok([
        per_second(0) - 2.0 / WINDOW.as_secs_f64(),
        per_second(1),
        per_second(2),
        per_second(3) / 1000.0,
    ])
}

/// Commands processed, EVALSHA calls, PING calls and µs Redis spent in EVALSHA so far.
async fn counts(conn: &mut MultiplexedConnection) -> redis::RedisResult<[u64; 4]> {
    let stats: String = redis::cmd("INFO").arg("stats").query_async(conn).await?;
    let commands: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(conn)
        .await?;
    let field = |text: &str, line: &str, field: &str| {
        let rest = text.lines().find_map(|l| l.strip_prefix(line));
        // (`field` is never empty: `split("")` would cut between every character)
        let value = rest.map(|rest| rest.split_once(field).map_or(rest, |(_, v)| v));
        value
            .and_then(|v| v.split(',').next()?.trim().parse().ok())
            .unwrap_or(0)
    };
    Ok([
        field(&stats, "total_commands_processed", ":"),
        field(&commands, "cmdstat_evalsha:", "calls="),
        field(&commands, "cmdstat_ping:", "calls="),
        field(&commands, "cmdstat_evalsha:", "usec="),
    ])
}
