//! Quorum locks (RedLock) over three independent Redis masters.
//!
//! ```text
//! cargo run --example quorum          # starts three throwaway redis-server processes
//! QUORUM_URLS=redis://10.0.0.1:6379,redis://10.0.0.2:6379,redis://10.0.0.3:6379 \
//!     cargo run --example quorum
//! ```
//!
//! Two managers (two "replicas") add to a shared balance under one quorum lock; the fencing
//! token of each holder is printed. Then, if the example started the masters itself, one master is
//! killed: the locks keep working on the remaining majority.

#[path = "../tests/support/mod.rs"]
mod support;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tower_lock::{LockManager, LockOptions};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (urls, mut servers) = match std::env::var("QUORUM_URLS") {
        Ok(urls) => (urls.split(',').map(str::to_owned).collect(), Vec::new()),
        Err(_) => {
            let servers: Vec<support::RedisServer> =
                (0..3).map(|_| support::RedisServer::start()).collect();
            (servers.iter().map(|s| s.url()).collect::<Vec<_>>(), servers)
        }
    };
    println!("quorum of {} masters: {}", urls.len(), urls.join(", "));

    // Every replica of the service builds one manager over the same masters.
    let replicas = [
        LockManager::builder()
            .namespace("example")
            .quorum(urls.clone())
            .node_timeout(Duration::from_millis(100))
            .build()
            .await?,
        LockManager::builder()
            .namespace("example")
            .quorum(urls.clone())
            .node_timeout(Duration::from_millis(100))
            .build()
            .await?,
    ];
    let opts = LockOptions::exclusive().wait_timeout(Duration::from_secs(5));

    let balance = Arc::new(AtomicU64::new(0));
    run_round(&replicas, &opts, &balance).await?;

    if let Some(server) = servers.first_mut() {
        println!("killing master {} (SIGKILL)", server.url());
        server.kill();
        run_round(&replicas, &opts, &balance).await?;
    }

    // A request that finds the lock held elsewhere is told "busy", not "down".
    let held = replicas[0].acquire("account:42", &opts).await?;
    let busy = replicas[1].try_acquire("account:42", &opts).await?;
    println!("while replica 0 holds it, replica 1's try_acquire: {busy:?}");
    held.release().await?;
    Ok(())
}

/// Both replicas deposit 1 unit ten times each, read-modify-write under the lock.
async fn run_round(
    replicas: &[LockManager; 2],
    opts: &LockOptions,
    balance: &Arc<AtomicU64>,
) -> Result<(), tower_lock::LockError> {
    let mut tasks = Vec::new();
    for (r, manager) in replicas.iter().enumerate() {
        let (manager, opts, balance) = (manager.clone(), *opts, balance.clone());
        tasks.push(tokio::spawn(async move {
            for _ in 0..10 {
                let guard = manager.acquire("account:42", &opts).await?;
                // Pass the token to the storage: it refuses writes older than one it has seen.
                let token = guard.fencing_token();
                let read = balance.load(Ordering::SeqCst);
                tokio::task::yield_now().await;
                balance.store(read + 1, Ordering::SeqCst);
                println!(
                    "replica {r} holds account:42 with token {token}: balance {}",
                    read + 1
                );
                guard.release().await?;
            }
            Ok::<_, tower_lock::LockError>(())
        }));
    }
    for task in tasks {
        task.await.expect("task")?;
    }
    println!(
        "balance now {} (no lost update)",
        balance.load(Ordering::SeqCst)
    );
    Ok(())
}
