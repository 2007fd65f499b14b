//! What many waiters and many held locks cost, against its own redis-server (or `REDIS_URL`).
//!
//! ```text
//! cargo run --release --example scale
//! ```
//!
//! 1. 10,000 requests waiting on 1,000 held keys: extra RSS of the process, Redis commands per second
//!    while they wait, pub/sub connections of the waiting manager.
//! 2. The watchdog renewing 10,000 held leases: script calls (round trips) per renewal period.

#[path = "../tests/support/mod.rs"]
mod support;

use std::time::{Duration, Instant};

use tower_lock::{LockManager, LockOptions};

const WAITERS: usize = 10_000;
const KEYS: usize = 1_000;
const LEASES: usize = 10_000;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut server = None;
    let url = match std::env::var("REDIS_URL") {
        Ok(url) => url,
        Err(_) => {
            let s = support::RedisServer::start();
            let url = s.url();
            server = Some(s);
            url
        }
    };
    let client = redis::Client::open(url.as_str())?;
    let mut conn = client.get_multiplexed_async_connection().await?;

    // 1. many waiters
    let holder = LockManager::redis(&url).await?;
    let m = LockManager::redis(&url).await?;
    let mut held = Vec::new();
    for k in 0..KEYS {
        held.push(
            holder
                .acquire(&format!("scale:{k}"), &LockOptions::exclusive())
                .await?,
        );
    }
    let rss_before = rss_kib();
    let calls_before = stat(&mut conn, "commandstats", "cmdstat_evalsha:", "calls=").await?;
    let mut tasks = Vec::with_capacity(WAITERS);
    for i in 0..WAITERS {
        let m = m.clone();
        tasks.push(tokio::spawn(async move {
            let key = format!("scale:{}", i % KEYS);
            drop(m.acquire(&key, &LockOptions::exclusive()).await);
        }));
    }
    // wait until every waiter made its one attempt
    let settle = Instant::now() + Duration::from_secs(60);
    while stat(&mut conn, "commandstats", "cmdstat_evalsha:", "calls=").await?
        < calls_before + WAITERS as u64
        && Instant::now() < settle
    {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let rss_waiting = rss_kib();
    let before = stat(&mut conn, "stats", "total_commands_processed:", "").await?;
    let window = Duration::from_secs(3);
    tokio::time::sleep(window).await;
    let during = stat(&mut conn, "stats", "total_commands_processed:", "").await? - before;
    let pubsub: String = redis::cmd("CLIENT")
        .arg("LIST")
        .arg("TYPE")
        .arg("pubsub")
        .query_async(&mut conn)
        .await?;
    println!("tower-lock scale, Redis at {url}");
    println!("{WAITERS} requests waiting on {KEYS} held keys:");
    println!("  waiting in the manager          {}", m.waiting());
    println!(
        "  extra RSS while they wait       {:.1} MiB",
        (rss_waiting - rss_before) as f64 / 1024.0
    );
    println!(
        "  Redis commands/s while waiting  {:.1} (the probe's own INFO excluded)",
        (during.saturating_sub(1)) as f64 / window.as_secs_f64()
    );
    println!(
        "  pub/sub connections (2 managers) {}",
        pubsub.lines().count()
    );
    let released = Instant::now();
    drop(held);
    for t in tasks {
        t.await?;
    }
    println!(
        "  all {WAITERS} acquired and released {:.2?} after the holders let go",
        released.elapsed()
    );

    // 2. many leases
    let lease = Duration::from_secs(3);
    let w = LockManager::builder()
        .redis(&url)
        .lease(lease)
        .build()
        .await?;
    let mut guards = Vec::with_capacity(LEASES);
    for k in 0..LEASES {
        guards.push(
            w.acquire(&format!("lease:{k}"), &LockOptions::exclusive())
                .await?,
        );
    }
    let before = stat(&mut conn, "commandstats", "cmdstat_evalsha:", "calls=").await?;
    let periods = 3;
    tokio::time::sleep(lease / 3 * periods).await;
    let calls = stat(&mut conn, "commandstats", "cmdstat_evalsha:", "calls=").await? - before;
    let lost = guards.iter().filter(|g| g.is_lost()).count();
    println!(
        "watchdog keeping {LEASES} leases (lease {lease:?}, renewed every {:?}):",
        lease / 3
    );
    println!(
        "  script calls per renewal period {:.1}",
        calls as f64 / periods as f64
    );
    println!("  leases lost                     {lost}");
    drop(guards);
    drop(server);
    Ok(())
}

/// A numeric field of `INFO section`, from the line starting with `line`, after `field` (if any).
async fn stat(
    conn: &mut redis::aio::MultiplexedConnection,
    section: &str,
    line: &str,
    field: &str,
) -> redis::RedisResult<u64> {
    let info: String = redis::cmd("INFO").arg(section).query_async(conn).await?;
    Ok(info
        .lines()
        .find_map(|l| l.strip_prefix(line))
        // (an empty `field`: the line's value is the number itself)
        .and_then(|rest| match field {
            "" => Some(rest),
            _ => rest.split(field).nth(1),
        })
        .and_then(|v| v.split(',').next())
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0))
}

/// Resident set size of this process, in KiB (Linux).
fn rss_kib() -> i64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}
