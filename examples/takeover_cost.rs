//! What takeover of dead holders costs Redis while requests wait, against its own redis-server
//! (or `REDIS_URL`).
//!
//! ```text
//! cargo run --release --example takeover_cost
//! ```
//!
//! For 1, 100 and 10,000 requests, each waiting for its own lock held by another manager (both
//! live), the Redis commands per second while they wait, with takeover on (grace 1 s: probes of
//! the waiting manager, PINGs of both) and off; of those with takeover, the EVALSHAs and PINGs,
//! and the milliseconds per second Redis spent running scripts. Redis counts the commands a
//! script runs among the commands it processed.

#[path = "../tests/support/mod.rs"]
mod support;

use std::time::{Duration, Instant};

use redis::aio::MultiplexedConnection;
use tower_lock::{LockManager, LockOptions};

const GRACE: Duration = Duration::from_secs(1);
const WINDOW: Duration = Duration::from_secs(5);

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
    println!("commands/s while requests wait, each for its own held lock ({WINDOW:?} windows)");
    println!(
        "{:>8} {:>10} {:>22} {:>10}",
        "waiting", "takeover", "all (evalsha, ping, script ms)", "off"
    );
    for waiting in [1, 100, 10_000] {
        let on = rates(&url, &mut conn, waiting, true).await?;
        let off = rates(&url, &mut conn, waiting, false).await?;
        let on_detail = format!("{:.1} ({:.1}, {:.1}, {:.1})", on[0], on[1], on[2], on[3]);
        println!("{waiting:>8} {:>10} {on_detail:>22} {:>10.1}", "on", off[0]);
    }
    Ok(())
}

/// Commands, EVALSHAs and PINGs per second while `waiting` requests wait, and ms per second
/// Redis spent running scripts.
async fn rates(
    url: &str,
    conn: &mut MultiplexedConnection,
    waiting: usize,
    takeover: bool,
) -> Result<[f64; 4], Box<dyn std::error::Error>> {
    let manager = || {
        let builder = LockManager::builder().redis(url);
        match takeover {
            true => builder.takeover_grace(GRACE),
            false => builder,
        }
        .build()
    };
    let (holder, waiter) = (manager().await?, manager().await?);
    let mut held = Vec::with_capacity(waiting);
    for k in 0..waiting {
        let key = format!("cost:{k}");
        held.push(holder.acquire(&key, &LockOptions::exclusive()).await?);
    }
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
    let before = counts(conn).await?;
    tokio::time::sleep(WINDOW).await;
    let after = counts(conn).await?;
    drop(held);
    for task in tasks {
        task.await?;
    }
    holder.shutdown().await?;
    waiter.shutdown().await?;
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
