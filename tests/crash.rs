//! A holder whose process dies (SIGKILL) frees the lock one lease later. The test binary runs itself
//! as the child holder process, so it has a plain `main` (`harness = false`).

mod support;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use support::RedisServer;
use tower_lock::{LockManager, LockOptions};

const CHILD_ENV: &str = "TOWER_LOCK_CRASH_CHILD_URL";
const LEASE: Duration = Duration::from_secs(1);

fn main() {
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    if let Ok(url) = std::env::var(CHILD_ENV) {
        runtime.block_on(hold_until_killed(&url));
        return;
    }
    println!("\nrunning 1 test");
    runtime.block_on(holder_killed_frees_the_lock_after_its_lease());
    println!("test holder_killed_frees_the_lock_after_its_lease ... ok");
    println!("\ntest result: ok. 1 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out\n");
}

/// The child: take the lock, say so, and hold it (renewing) until killed.
async fn hold_until_killed(url: &str) {
    let m = LockManager::builder()
        .redis(url)
        .lease(LEASE)
        .build()
        .await
        .expect("child manager");
    let _guard = m
        .acquire("crash", &LockOptions::exclusive())
        .await
        .expect("child acquire");
    println!("HELD");
    // Exit when the parent goes away (its end of stdin closes), so a failed test leaves no holder.
    let _ = tokio::task::spawn_blocking(|| std::io::stdin().read_line(&mut String::new())).await;
    std::process::exit(0);
}

async fn holder_killed_frees_the_lock_after_its_lease() {
    let server = RedisServer::start();
    let mut child = Command::new(std::env::current_exe().expect("test binary"))
        .env(CHILD_ENV, server.url())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn the holder process");
    let mut line = String::new();
    let stdout = child.stdout.take().expect("child stdout");
    BufReader::new(stdout)
        .read_line(&mut line)
        .expect("read child");
    assert_eq!(line.trim(), "HELD");

    let m = LockManager::redis(&server.url()).await.expect("manager");
    // the child's watchdog keeps the lock for several leases while it lives
    tokio::time::sleep(LEASE * 2).await;
    assert!(m
        .try_acquire("crash", &LockOptions::exclusive())
        .await
        .unwrap()
        .is_none());

    child.kill().expect("SIGKILL the holder");
    child.wait().expect("reap");
    let killed = Instant::now();
    let opts = LockOptions::exclusive().wait_timeout(Duration::from_secs(10));
    let guard = m
        .acquire("crash", &opts)
        .await
        .expect("the dead holder's lease runs out");
    let waited = killed.elapsed();
    assert!(
        waited <= LEASE + Duration::from_millis(1500),
        "freed after {waited:?}"
    );
    guard.release().await.unwrap();
}
