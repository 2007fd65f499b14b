//! How long a killed holder keeps its lock: with takeover (the grace) and without (the lease).
//!
//! ```text
//! cargo run --release --example takeover              # 20 trials, 3 s lease, default grace
//! cargo run --release --example takeover -- 20 6 1000 # trials, lease s, grace ms
//! QUORUM=3 cargo run --release --example takeover     # on a quorum of 3 redis-servers
//! CLUSTER=1 cargo run --release --features cluster --example takeover  # on a local cluster
//! ```
//!
//! Each trial starts a child process (this binary again) that takes a lock and holds it; a request
//! of this process waits for the lock; the child is killed with SIGKILL; the time from the kill to
//! the waiter's acquisition is one sample. The same number of trials runs with takeover on (both
//! managers with the grace: the builder's default unless given) and off, and the p50/p99 of each
//! are printed side by side. Without
//! takeover a sample is what is left of the holder's lease (between 2/3 of it and all of it).

#[path = "../tests/support/mod.rs"]
mod support;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use support::stats::{median, p99};
use tower_lock::{LockManager, LockOptions};

const CHILD: &str = "TOWER_LOCK_TAKEOVER_CHILD";
/// What a cluster's URLs begin with, in place of one server's.
const CLUSTER: &str = "cluster:";

/// What one run measures, from its arguments: trials, lease in seconds, grace in milliseconds.
struct Setup {
    trials: usize,
    lease: Duration,
    /// `None`: the builder's default.
    grace: Option<Duration>,
}

impl Setup {
    fn from_args() -> Setup {
        let arg = |i: usize, default: u64| {
            let given = std::env::args().nth(i).map(|a| a.parse::<u64>());
            given.map_or(default, |a| a.expect("arguments: trials lease_s grace_ms"))
        };
        Setup {
            trials: usize::try_from(arg(1, 20)).expect("trials"),
            lease: Duration::from_secs(arg(2, 3)),
            grace: std::env::args()
                .nth(3)
                .map(|_| Duration::from_millis(arg(3, 0))),
        }
    }

    /// A manager on `url` (a quorum's masters' URLs joined by commas; a cluster's nodes', after
    /// `cluster:`), with the grace when `takeover`.
    async fn manager(&self, url: &str, takeover: bool) -> LockManager {
        let builder = match (url.strip_prefix(CLUSTER), url.contains(',')) {
            #[cfg(feature = "cluster")]
            (Some(nodes), _) => LockManager::builder().cluster(nodes.split(',')),
            (_, true) => LockManager::builder().quorum(url.split(',')),
            _ => LockManager::builder().redis(url),
        };
        let builder = builder.lease(self.lease);
        let builder = match (takeover, self.grace) {
            (true, Some(grace)) => builder.takeover_grace(grace),
            (true, None) => builder,
            (false, _) => builder.no_takeover(),
        };
        builder.build().await.expect("manager")
    }
}

#[tokio::main]
async fn main() {
    let setup = Setup::from_args();
    if let Ok(url) = std::env::var(CHILD) {
        let takeover = std::env::var("TAKEOVER").is_ok_and(|t| t == "on");
        let m = setup.manager(&url, takeover).await;
        let _held = m.acquire("takeover", &LockOptions::exclusive()).await;
        println!("READY");
        let _ = std::io::stdin().read_line(&mut String::new());
        return;
    }
    let masters = std::env::var("QUORUM").map(|n| n.parse().expect("QUORUM: masters"));
    let (url, _servers) = match (std::env::var("REDIS_URL"), masters) {
        (Ok(url), _) => (url, None),
        #[cfg(feature = "cluster")]
        _ if std::env::var("CLUSTER").is_ok() => {
            let cluster = support::cluster::Cluster::start();
            (
                format!("{CLUSTER}{}", cluster.urls().join(",")),
                Some(cluster.nodes),
            )
        }
        (Err(_), Ok(n)) => {
            let masters = support::masters::Masters::start(n);
            (masters.urls().join(","), Some(masters.servers))
        }
        (Err(_), Err(_)) => {
            let server = support::RedisServer::start();
            (server.url(), Some(vec![server]))
        }
    };
    println!(
        "{} trials each, lease {:?}, grace {:?}: time from SIGKILL to the waiter's lock",
        setup.trials,
        setup.lease,
        setup.grace.unwrap_or(tower_lock::DEFAULT_TAKEOVER_GRACE)
    );
    let on = samples(&setup, &url, true).await;
    let off = samples(&setup, &url, false).await;
    println!("{:<14} {:>10} {:>10}", "", "p50", "p99");
    for (name, samples) in [("takeover on", &on), ("takeover off", &off)] {
        let (p50, p99) = (median(samples), p99(samples));
        println!("{name:<14} {:>10.3?} {:>10.3?}", p50, p99);
    }
}

/// The takeover time of each trial, with takeover on or off.
async fn samples(setup: &Setup, url: &str, takeover: bool) -> Vec<Duration> {
    let m = setup.manager(url, takeover).await;
    let mut samples = Vec::with_capacity(setup.trials);
    for _ in 0..setup.trials {
        samples.push(one_trial(&m, url, takeover).await);
    }
    samples
}

/// One trial: a child holds the lock, a request waits, the child is killed.
async fn one_trial(m: &LockManager, url: &str, takeover: bool) -> Duration {
    let mut child = Command::new(std::env::current_exe().expect("this binary"))
        .args(std::env::args().skip(1))
        .env(CHILD, url)
        .env("TAKEOVER", if takeover { "on" } else { "off" })
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn the holder");
    let mut line = String::new();
    let stdout = child.stdout.take().expect("child stdout");
    BufReader::new(stdout)
        .read_line(&mut line)
        .expect("read the holder");
    assert_eq!(line.trim(), "READY");
    let waiter = {
        let m = m.clone();
        tokio::spawn(async move { m.acquire("takeover", &LockOptions::exclusive()).await })
    };
    // the waiter queues; the kill then falls anywhere in the probes' second
    // (random: a trial begins in step with the probes, as the last one ended with a probe)
    let spread = u64::try_from(uuid::Uuid::new_v4().as_u128() % 1000).unwrap_or(0);
    let settle = Duration::from_millis(300 + spread);
    tokio::time::sleep(settle).await;
    child.kill().expect("SIGKILL the holder");
    let killed = Instant::now();
    child.wait().expect("reap");
    let guard = waiter.await.expect("waiter").expect("acquire");
    let took = killed.elapsed();
    guard.release().await.expect("release");
    took
}
