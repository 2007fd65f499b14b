//! Waiting for a condition: [`eventually`] in async tests, [`wait_until`] where nothing can await.

use std::thread;
use std::time::{Duration, Instant};

/// How long a test waits for something that should happen.
pub const GENEROUS: Duration = Duration::from_secs(10);

/// Polls `cond` every 5 ms until it returns `true` or `within` elapses, yielding to the runtime in
/// between; returns whether the condition became true.
pub async fn eventually(within: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + within;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Polls `cond` every 10 ms until it returns `true` or `timeout` elapses, blocking the thread;
/// returns whether the condition became true. For code that cannot await (a plain `main`).
pub fn wait_until(timeout: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        thread::sleep(Duration::from_millis(10));
    }
}
