//! One kind of uncontended lock cycle, N times in a row on one thread: the client's cost of an
//! acquire + release, for `scripts/cycle-instructions.sh` to count under callgrind.
//!
//! ```text
//! cargo run --release --example cycle -- fair 1000        # starts its own redis-server
//! REDIS_URL=redis://127.0.0.1:6379 cargo run --release --example cycle -- setnx 1000
//! ```
//!
//! Cycles: `exclusive` and `fair` (acquire, then an awaited release, through a `LockManager`),
//! `setnx` (the hand-rolled lock of the HTTP benchmark: `SET NX PX` with a random token, then a
//! compare-and-delete script), `rslock` (rslock's lock and unlock on one server: the same protocol
//! through a Redlock crate) and `none` (only the setup, which the script subtracts). Everything
//! runs on one thread (a current-thread runtime), so that the count is the process's own work and
//! not the scheduling between threads.

#[path = "common/setnx.rs"]
mod setnx;
#[path = "../tests/support/mod.rs"]
mod support;

use std::time::Duration;

use tower_lock::{LockManager, LockOptions};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let (Some(cycle), Some(count)) = (args.next(), args.next()) else {
        return Err("usage: cycle exclusive|fair|setnx|rslock|none COUNT".into());
    };
    let count: usize = count.parse()?;
    let (url, _server) = match std::env::var("REDIS_URL") {
        Ok(url) => (url, None),
        Err(_) => {
            let server = support::RedisServer::start();
            (server.url(), Some(server))
        }
    };
    let mut conn = redis::Client::open(url.as_str())?
        .get_multiplexed_async_connection()
        .await?;
    let manager = LockManager::redis(&url).await?;
    let opts = match cycle.as_str() {
        "exclusive" | "setnx" | "rslock" | "none" => LockOptions::exclusive(),
        "fair" => LockOptions::fair(),
        other => return Err(format!("unknown cycle {other:?}").into()),
    };
    let release = setnx::release_script();
    let rslock = rslock::LockManager::new(vec![url.as_str()]);
    for _ in 0..count {
        match cycle.as_str() {
            "none" => {}
            "setnx" => setnx::cycle(&mut conn, &release, "bench:cycle:setnx").await?,
            "rslock" => {
                let hold = rslock
                    .lock("bench:cycle:rslock", Duration::from_secs(30))
                    .await?;
                rslock.unlock(&hold).await;
            }
            _ => {
                let guard = manager.acquire("bench:cycle", &opts).await?;
                guard.release().await?;
            }
        }
    }
    Ok(())
}
