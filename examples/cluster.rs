//! Locks on a Redis Cluster against one Redis server, in the same run on the same machine.
//!
//! ```text
//! cargo run --release --features cluster --example cluster
//! ```
//!
//! Starts a local cluster (3 masters, 3 replicas, `redis-cli --cluster create`) and one server.
//! Then, alternately on each, 256 tasks of two managers take and release locks over 1,000 keys for
//! 5 s (`CLUSTER_SECS`), and the acquisitions per second are printed with their ratio. Last, what
//! a release that wakes a waiter of another manager costs on each cluster node: commands and
//! bytes in and out per release, from `INFO stats` before and after 1,000 of them.

#[path = "../tests/support/mod.rs"]
mod support;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use support::cluster::Cluster;
use support::RedisServer;
use tower_lock::{LockManager, LockOptions};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let secs = std::env::var("CLUSTER_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5);
    let cluster = Cluster::start();
    let single = RedisServer::start();
    let on_cluster = [
        LockManager::cluster(cluster.urls()).await?,
        LockManager::cluster(cluster.urls()).await?,
    ];
    let on_single = [
        LockManager::redis(&single.url()).await?,
        LockManager::redis(&single.url()).await?,
    ];
    println!("256 tasks, 2 managers, 1,000 keys, no hold, {secs} s per run");
    for round in 1..=3 {
        let one = spread(&on_single, Duration::from_secs(secs)).await;
        let many = spread(&on_cluster, Duration::from_secs(secs)).await;
        println!(
            "run {round}: one server {one:.0}/s, cluster of 3 masters {many:.0}/s (cluster / one {:.2})",
            many / one
        );
    }
    release_cost(&cluster, &on_cluster).await?;
    Ok(())
}

/// Acquisitions per second of 256 tasks over 1,000 keys.
async fn spread(managers: &[LockManager; 2], run_for: Duration) -> f64 {
    let stop = Arc::new(AtomicBool::new(false));
    let count = Arc::new(AtomicU64::new(0));
    let tasks: Vec<_> = (0..256u64)
        .map(|t| {
            let (m, stop, count) = (
                managers[t as usize % 2].clone(),
                stop.clone(),
                count.clone(),
            );
            tokio::spawn(async move {
                let mut rng = t * 0x9e37_79b9_7f4a_7c15 + 1;
                while !stop.load(Ordering::Relaxed) {
                    rng ^= rng << 13;
                    rng ^= rng >> 7;
                    rng ^= rng << 17;
                    let key = format!("spread:{}", rng % 1000);
                    let guard = m.acquire(&key, &LockOptions::exclusive()).await;
                    guard.expect("acquire").release().await.expect("release");
                    count.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    let started = Instant::now();
    tokio::time::sleep(run_for).await;
    stop.store(true, Ordering::Relaxed);
    for task in tasks {
        task.await.expect("task");
    }
    count.load(Ordering::Relaxed) as f64 / started.elapsed().as_secs_f64()
}

/// Commands and bytes per node for releases that each wake a waiter of the other manager.
async fn release_cost(
    cluster: &Cluster,
    managers: &[LockManager; 2],
) -> Result<(), Box<dyn std::error::Error>> {
    const RELEASES: u64 = 1000;
    let stats = |node: &RedisServer| {
        let info = node.info("stats");
        let field = |name: &str| -> u64 {
            (info
                .lines()
                .find_map(|l| l.strip_prefix(name)?.strip_prefix(':')))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0)
        };
        [
            field("total_commands_processed"),
            field("total_net_input_bytes"),
            field("total_net_output_bytes"),
        ]
    };
    let opts = LockOptions::fair();
    // the waiter's slot is subscribed before counting
    managers[1].acquire("cost", &opts).await?.release().await?;
    let mut holder = managers[0].acquire("cost", &opts).await?;
    let before: Vec<[u64; 3]> = cluster.nodes.iter().map(stats).collect();
    for i in 0..RELEASES {
        let next = &managers[(i as usize + 1) % 2];
        let waiting = {
            let next = next.clone();
            tokio::spawn(async move { next.acquire("cost", &LockOptions::fair()).await })
        };
        while next.queued() == 0 {
            tokio::task::yield_now().await;
        }
        holder.release().await?;
        holder = waiting.await??;
    }
    let after: Vec<[u64; 3]> = cluster.nodes.iter().map(stats).collect();
    holder.release().await?;
    let owner = cluster.master_of("tower-lock:cost").port();
    println!("per fair hand-off (a release that grants the lock to a waiter of the other manager, and that waiter's acquire before it), by node:");
    for ((node, b), a) in cluster.nodes.iter().zip(&before).zip(&after) {
        let per = |i: usize| (a[i] - b[i]) as f64 / RELEASES as f64;
        let role = if node.port() == owner {
            "master of the lock's slot"
        } else {
            ""
        };
        println!(
            "  node {}: {:5.1} commands, {:6.0} bytes in, {:6.0} bytes out  {role}",
            node.port(),
            per(0),
            per(1),
            per(2)
        );
    }
    Ok(())
}
