//! The README's first command: why a distributed lock matters, in a few seconds.
//!
//! ```text
//! cargo run --release --example demo                                  # in memory
//! REDIS_URL=redis://127.0.0.1:6379 cargo run --release --example demo # on Redis
//! ```
//!
//! Two "replicas" deposit into a few hot accounts and many cold ones, concurrently, each deposit
//! a non-atomic read-modify-write with an await in between (as a handler talking to a database
//! would do). Run once without the lock and once with it; count the deposits that were lost. On
//! Redis each replica has its own manager, as separate machines would; in memory they share one.
//! Exits non-zero if the locked run lost any update.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tower_lock::{LockManager, LockOptions};

const DEPOSITS: usize = 4000;
const CONCURRENCY: usize = 64;
const HOT_ACCOUNTS: u64 = 4;
const COLD_ACCOUNTS: u64 = 1000;

/// A toy account store: reads and writes are separate awaits, like a remote database.
#[derive(Clone, Default)]
struct Store(Arc<Mutex<HashMap<u64, u64>>>);

impl Store {
    async fn read(&self, account: u64) -> u64 {
        tokio::task::yield_now().await;
        *self.0.lock().expect("store").get(&account).unwrap_or(&0)
    }

    async fn write(&self, account: u64, balance: u64) {
        tokio::task::yield_now().await;
        self.0.lock().expect("store").insert(account, balance);
    }

    fn total(&self) -> u64 {
        self.0.lock().expect("store").values().sum()
    }
}

struct Run {
    lost: u64,
    per_sec: f64,
    p50: Duration,
    p99: Duration,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let replicas = match std::env::var("REDIS_URL") {
        Ok(url) => {
            println!("backend: Redis at {url} (one manager per replica)");
            [LockManager::redis(&url).await?, LockManager::redis(&url).await?]
        }
        Err(_) => {
            println!("backend: in memory (set REDIS_URL to use Redis)");
            let m = LockManager::memory();
            [m.clone(), m]
        }
    };
    println!(
        "{DEPOSITS} deposits of 1 by {CONCURRENCY} concurrent requests over 2 replicas, \
         ~half on {HOT_ACCOUNTS} hot accounts\n"
    );
    let without = run(&replicas, false).await?;
    let with = run(&replicas, true).await?;
    println!("{:<14} {:>12} {:>12} {:>12} {:>12}", "", "lost updates", "requests/s", "p50", "p99");
    for (name, r) in [("without lock", &without), ("with lock", &with)] {
        println!(
            "{name:<14} {:>12} {:>12.0} {:>12.1?} {:>12.1?}",
            r.lost, r.per_sec, r.p50, r.p99
        );
    }
    if with.lost > 0 {
        eprintln!("\nFAILED: {} updates were lost under the lock", with.lost);
        std::process::exit(1);
    }
    println!("\nno update lost under the lock");
    Ok(())
}

async fn run(replicas: &[LockManager; 2], locked: bool) -> Result<Run, tower_lock::LockError> {
    let store = Store::default();
    let started = Instant::now();
    let latencies = Arc::new(Mutex::new(Vec::with_capacity(DEPOSITS)));
    let mut workers = Vec::new();
    for w in 0..CONCURRENCY {
        let (m, store, latencies) = (replicas[w % 2].clone(), store.clone(), latencies.clone());
        workers.push(tokio::spawn(async move {
            let mut i = w;
            while i < DEPOSITS {
                let account = if i % 2 == 0 {
                    i as u64 % HOT_ACCOUNTS
                } else {
                    HOT_ACCOUNTS + (i as u64 * 7919) % COLD_ACCOUNTS
                };
                let t = Instant::now();
                let guard = if locked {
                    let opts = LockOptions::exclusive().wait_timeout(Duration::from_secs(10));
                    Some(m.acquire(&format!("account:{account}"), &opts).await?)
                } else {
                    None
                };
                let balance = store.read(account).await;
                store.write(account, balance + 1).await;
                if let Some(guard) = guard {
                    guard.release().await?;
                }
                latencies.lock().expect("latencies").push(t.elapsed());
                i += CONCURRENCY;
            }
            Ok::<(), tower_lock::LockError>(())
        }));
    }
    for w in workers {
        w.await.expect("worker")?;
    }
    let elapsed = started.elapsed();
    let mut lat = std::mem::take(&mut *latencies.lock().expect("latencies"));
    lat.sort();
    Ok(Run {
        lost: DEPOSITS as u64 - store.total(),
        per_sec: DEPOSITS as f64 / elapsed.as_secs_f64(),
        p50: lat[lat.len() / 2],
        p99: lat[lat.len() * 99 / 100],
    })
}
