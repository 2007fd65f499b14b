//! A flood process: thousands of waiters queued on the chaos keys, each its own owner, every hold
//! through Redis (`local_handoffs(0)`), until the fault schedule kills the process. Its waiters stay
//! in Redis's queues and wait records as dead ones, which the live clients' grants and heartbeats
//! must step over: no live waiter may sleep behind them, and no key may be left without an expiry.
//!
//! It reaches the servers directly (no proxy), logs nothing and writes nothing: a waiter that gets a
//! lock keeps it until the process dies, as a holder on a machine that dies would.

use std::time::Duration;

use tower_lock::LockManager;

use crate::{Mode, Rng, EVICTION, KEYS, LEASE};

/// Set in a flood process's environment: the servers' URLs, comma-separated.
pub const FLOOD_ENV: &str = "CHAOS_FLOOD";
/// Waiters in one flood, spread over the keys: each key's queue is far past a script's skip bound.
pub const WAITERS: usize = 2000;

pub async fn run(urls: &str) {
    let mode = Mode::parse(&std::env::var("CHAOS_MODE").expect("CHAOS_MODE"));
    let urls: Vec<&str> = urls.split(',').collect();
    let builder = LockManager::builder()
        .lease(LEASE)
        .fair_eviction(EVICTION)
        .local_handoffs(0);
    let builder = match mode {
        Mode::Quorum => builder.quorum(urls.iter().copied()),
        _ => builder.redis(urls[0]),
    };
    let Ok(manager) = builder.build().await else {
        // Redis is down (another fault): no flood this time
        return;
    };
    let mut rng = Rng::new(std::process::id() as u64);
    for _ in 0..WAITERS {
        let key = format!("chaos-{}", rng.below(KEYS));
        let (opts, _) = mode.options(&mut rng);
        let opts = opts.wait_timeout(Duration::from_secs(3600));
        let manager = manager.clone();
        tokio::spawn(async move {
            if let Ok(_guard) = manager.acquire(&key, &opts).await {
                std::future::pending::<()>().await;
            }
        });
    }
    std::future::pending::<()>().await;
}
