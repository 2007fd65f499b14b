//! A soak: many acquire/release cycles through one Redis manager, over many keys, in exclusive and
//! fair mode, with re-entry, `try_acquire` and guards dropped instead of released. At the end the
//! manager's tables are empty, and Redis holds only what the data model allows: no lock, no queue,
//! and no key without an expiry.
//!
//! In the suite it runs 20,000 cycles over 1,000 keys. `SOAK=1` runs 1,000,000 cycles over 10,000
//! keys and prints the resident memory every 100,000 cycles (it must stay flat).

#[path = "support/mod.rs"]
mod support;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tower_lock::{LockManager, LockOptions};

use support::{eventually, RedisServer, GENEROUS};

const NAMESPACE: &str = "soak";
const TASKS: u64 = 64;
const REPORT_EVERY: u64 = 100_000;

/// How many cycles over how many keys: the suite's size, or the soak's with `SOAK=1`.
fn size() -> (u64, usize) {
    match std::env::var("SOAK").as_deref() {
        Ok("1") => (1_000_000, 10_000),
        _ => (20_000, 1_000),
    }
}

/// A small xorshift generator: the same run for the same seed, and no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// What the tasks share: the manager, whether each key is held by one of them, and progress.
struct Soak {
    manager: LockManager,
    inside: Vec<AtomicBool>,
    cycles: AtomicU64,
    rss: std::sync::Mutex<Vec<u64>>,
}

impl Soak {
    fn key(&self, k: usize) -> (String, LockOptions) {
        let opts = match k % 2 {
            0 => LockOptions::exclusive(),
            _ => LockOptions::fair(),
        };
        (
            format!("acct-{k}"),
            opts.wait_timeout(Duration::from_secs(10)),
        )
    }

    /// Mark `k` held by this task: nobody else may hold it.
    fn enter(&self, k: usize) {
        let before = self.inside[k].swap(true, Ordering::SeqCst);
        assert!(!before, "acct-{k}: two holders at once");
    }

    fn leave(&self, k: usize) {
        self.inside[k].store(false, Ordering::SeqCst);
    }

    /// One cycle on key `k`, in one of four shapes chosen by `shape`.
    async fn cycle(&self, k: usize, shape: u64) {
        let (key, opts) = self.key(k);
        match shape % 4 {
            0 => {
                let guard = self.manager.acquire(&key, &opts).await.unwrap();
                self.enter(k);
                self.leave(k);
                guard.release().await.unwrap();
            }
            1 => {
                let guard = self.manager.acquire(&key, &opts).await.unwrap();
                self.enter(k);
                self.leave(k);
                drop(guard); // released in the background
            }
            2 => {
                let owner = self.manager.owner();
                let outer = owner.acquire(&key, &opts).await.unwrap();
                self.enter(k);
                let inner = owner.acquire(&key, &opts).await.unwrap();
                assert_eq!(outer.fencing_token(), inner.fencing_token());
                inner.release().await.unwrap();
                self.leave(k);
                outer.release().await.unwrap();
            }
            _ => {
                if let Some(guard) = self.manager.try_acquire(&key, &opts).await.unwrap() {
                    self.enter(k);
                    self.leave(k);
                    guard.release().await.unwrap();
                }
            }
        }
        let done = self.cycles.fetch_add(1, Ordering::Relaxed) + 1;
        if done.is_multiple_of(REPORT_EVERY) {
            let rss = rss_kib();
            println!("soak: {done} cycles, RSS {rss} KiB");
            self.rss.lock().unwrap().push(rss);
        }
    }
}

/// This process's resident memory, in KiB.
fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    (status.lines())
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// Every key of the namespace, by `SCAN`.
fn all_keys(server: &RedisServer) -> Vec<String> {
    let (mut cursor, mut keys) = ("0".to_owned(), Vec::new());
    loop {
        let reply = server.cmd(&["SCAN", &cursor, "COUNT", "1000"]);
        let parts = reply.as_array().unwrap();
        cursor = parts[0].as_string().unwrap();
        keys.extend(parts[1].as_strings().unwrap());
        if cursor == "0" {
            return keys;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cycles_leave_nothing_behind() {
    let (cycles, keys) = size();
    let server = RedisServer::start();
    let manager = LockManager::builder()
        .namespace(NAMESPACE)
        .redis(server.url())
        .build()
        .await
        .unwrap();
    let soak = Arc::new(Soak {
        manager: manager.clone(),
        inside: (0..keys).map(|_| AtomicBool::new(false)).collect(),
        cycles: AtomicU64::new(0),
        rss: Default::default(),
    });
    let started = Instant::now();
    let tasks: Vec<_> = (0..TASKS)
        .map(|t| {
            let soak = soak.clone();
            tokio::spawn(async move {
                let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ (t + 1));
                for _ in 0..cycles / TASKS {
                    let k = (rng.next() % keys as u64) as usize;
                    soak.cycle(k, rng.next()).await;
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    let done = soak.cycles.load(Ordering::Relaxed);
    println!(
        "soak: {done} cycles over {keys} keys in {:?}",
        started.elapsed()
    );
    assert_eq!(done, cycles / TASKS * TASKS);

    // the manager's tables empty out (dropped guards release in the background)
    let empty = || manager.held() == 0 && manager.waiting() == 0 && manager.queued() == 0;
    assert!(
        eventually(GENEROUS, empty).await,
        "tables not empty: held {}, waiting {}, queued {}",
        manager.held(),
        manager.waiting(),
        manager.queued()
    );
    // A dropped guard's release is sent after its lease leaves the tables: wait for those still
    // on their way. A lock left behind would stay for its lease (30 s), longer than this wait.
    let released = || locks_and_queues(&all_keys(&server)) == 0;
    assert!(
        eventually(GENEROUS, released).await,
        "locks or fair queues left in Redis"
    );
    check_redis(&server);
    check_rss(&soak.rss.lock().unwrap());
}

/// How many of `keys` are locks or fair queues.
fn locks_and_queues(keys: &[String]) -> usize {
    (keys.iter())
        .filter(|key| matches!(key.rsplit_once('}'), Some((_, "" | ":ql"))))
        .count()
}

/// Redis holds no lock and no queue, every key is of the namespace, and none lacks an expiry.
fn check_redis(server: &RedisServer) {
    let keys = all_keys(server);
    let prefix = format!("{{{NAMESPACE}:");
    let mut by_kind = std::collections::BTreeMap::<&str, usize>::new();
    for key in &keys {
        assert!(key.starts_with(&prefix), "{key}: not of the namespace");
        let kind = match key.rsplit_once('}') {
            Some((_, "")) => "lock",
            Some((_, rest)) if rest.starts_with(":hb:") => ":hb",
            Some((_, rest)) => rest,
            None => "other",
        };
        *by_kind.entry(kind).or_default() += 1;
        let ttl = server.cmd(&["PTTL", key]).as_int().unwrap();
        // -2: the key ran out since the scan (a heartbeat's does within seconds)
        assert!(ttl > 0 || ttl == -2, "{key}: no expiry (PTTL {ttl})");
    }
    println!("soak: keys left in Redis by kind: {by_kind:?}");
    assert_eq!(by_kind.get("lock"), None, "locks left held");
    assert_eq!(by_kind.get(":ql"), None, "fair queues left");
}

/// With `SOAK=1`, resident memory stays flat: the last reading is within a quarter (and 8 MiB)
/// of the second (the first still grows with the keys' first use).
fn check_rss(readings: &[u64]) {
    if readings.len() < 3 {
        return;
    }
    let (second, last) = (readings[1], readings[readings.len() - 1]);
    assert!(
        last <= second + second / 4 + 8 * 1024,
        "RSS grew from {second} KiB to {last} KiB: {readings:?}"
    );
}
