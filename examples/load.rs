//! Lock throughput and fairness under contention, against Redis (its own redis-server unless
//! `REDIS_URL` is set) or in memory (`--memory`).
//!
//! ```text
//! cargo run --release --example load                 # every scenario, 5 s each
//! cargo run --release --example load -- hot fair     # only scenarios whose name has both words
//! LOAD_SECS=2 cargo run --release --example load -- --memory
//! LOAD_POOL=4 cargo run --release --example load -- spread  # 4 connections per manager
//! ```
//!
//! Tasks are split over two managers (two replicas; one where the name says `managers=1`). Each
//! loops acquire -> hold H -> release. Exclusive locks are handed on in memory between the tasks of
//! one manager (lock cohorting, the default); `exclusive-uncohorted` runs the same on managers
//! built with `local_handoffs(0)`, so that one invocation compares the two (and, on many keys,
//! a free lock taken by script against one taken on the plain path); `fair-cohort-order` is
//! fair mode with `LockOptions::cohort_order`.
//! Reported: acquisitions/s, per-task counts (min/max and Jain's fairness index), the first
//! manager's share of the acquisitions, acquire wait
//! p50/p99, the hold time H really took (measured from acquire returning to release being called;
//! the task waits H on a timerfd, as a handler waits for a database reply: idle, woken by an I/O
//! event, to the microsecond, where a tokio sleep would last 1-2 ms), the share of time the lock
//! was held ("busy"; the rest is hand-off), the hand-off of a hot key (from one holder calling
//! release to the next holder's acquire returning, each measured: median, its ratio to the PING
//! round trip measured in the same run, and p99), and the CPU time per acquisition of redis-server and of this process (the two managers and
//! their tasks). On this 2-core machine the two together bound the throughput of many keys: 2 s
//! of CPU a second.
//!
//! Shared locks: `hot read` has 64 readers of one key (they hold it together), `hot read+write`
//! the same readers and one writer that takes the key every 10 ms (its waits are printed below
//! the line); `read-groups` the same with `LockOptions::cohort_order`, so that the reads of one
//! manager share read holds; `hot semaphore(4)` 64 tasks sharing 4 permits, whose "busy" is the permits' average
//! occupancy (up to 400%) and whose hand-off is that of one permit.

#[path = "common/io_timer.rs"]
mod io_timer;
#[path = "../tests/support/mod.rs"]
mod support;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use io_timer::IoTimer;
use tower_lock::{LockManager, LockOptions, Mode};

struct Scenario {
    name: String,
    tasks: usize,
    keys: usize,
    hold: Duration,
    opts: LockOptions,
    /// One more task takes a write hold of the key every 10 ms.
    writer: bool,
    /// The tasks are spread over this many managers (1 or 2).
    managers: usize,
    /// The managers hand exclusive locks on in memory (lock cohorting, the default).
    cohorts: bool,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let memory = args.iter().any(|a| a == "--memory");
    let filters: Vec<&String> = args.iter().filter(|a| !a.starts_with("--")).collect();
    let secs = std::env::var("LOAD_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5);
    let run_for = Duration::from_secs(secs);

    let mut server = None;
    let url = match std::env::var("REDIS_URL") {
        Ok(url) => Some(url),
        Err(_) if memory => None,
        Err(_) => {
            let s = support::RedisServer::start();
            let url = s.url();
            server = Some(s);
            Some(url)
        }
    };
    let managers = match &url {
        Some(url) => {
            // LOAD_POOL: connections per manager, for comparing pool sizes (the builder's default
            // otherwise)
            let pool = std::env::var("LOAD_POOL").ok().and_then(|s| s.parse().ok());
            let manager = |handoffs: Option<u32>| {
                let mut builder = LockManager::builder().redis(url.clone());
                if let Some(size) = pool {
                    builder = builder.pool_size(size);
                }
                if let Some(handoffs) = handoffs {
                    builder = builder.local_handoffs(handoffs);
                }
                builder.build()
            };
            // the default (cohorting on), and the same without cohorting
            [
                [manager(None).await?, manager(None).await?],
                [manager(Some(0)).await?, manager(Some(0)).await?],
            ]
        }
        None => {
            let m = LockManager::memory();
            [[m.clone(), m.clone()], [m.clone(), m]]
        }
    };
    let rtt = match &url {
        Some(url) => Some(ping_rtt(url).await?),
        None => None,
    };

    let mut scenarios = Vec::new();
    let hot = |name: String, tasks, hold_ms, opts, managers, cohorts| Scenario {
        name,
        tasks,
        keys: 1,
        hold: Duration::from_millis(hold_ms),
        opts,
        writer: false,
        managers,
        cohorts,
    };
    for (mode, opts, cohorts) in [
        ("fair", LockOptions::fair(), true),
        ("exclusive", LockOptions::exclusive(), true),
        ("exclusive-uncohorted", LockOptions::exclusive(), false),
        (
            "fair-cohort-order",
            LockOptions::fair().cohort_order(),
            true,
        ),
    ] {
        for tasks in [8, 64] {
            for hold_ms in [0, 1] {
                let name = format!("hot {mode} tasks={tasks} hold={hold_ms}ms");
                scenarios.push(hot(name, tasks, hold_ms, opts, 2, cohorts));
            }
        }
        // one process: its 64 tasks share one memory
        let name = format!("hot {mode} tasks=64 hold=0ms managers=1");
        scenarios.push(hot(name, 64, 0, opts, 1, cohorts));
    }
    // without cohorting, an exclusive request takes a free lock by script, not on the plain path
    for (mode, opts, cohorts) in [
        ("exclusive", LockOptions::exclusive(), true),
        ("exclusive-uncohorted", LockOptions::exclusive(), false),
        ("fair", LockOptions::fair(), true),
    ] {
        scenarios.push(Scenario {
            name: format!("spread {mode} tasks=256 keys=1000 hold=0ms"),
            tasks: 256,
            keys: 1000,
            hold: Duration::ZERO,
            opts,
            writer: false,
            managers: 2,
            cohorts,
        });
        // 64 tasks over 100,000 keys: a lock is almost never busy, so this measures the cost of
        // an uncontended acquire and release alone
        scenarios.push(Scenario {
            name: format!("uncontended {mode} tasks=64 keys=100000 hold=0ms"),
            tasks: 64,
            keys: 100_000,
            hold: Duration::ZERO,
            opts,
            writer: false,
            managers: 2,
            cohorts,
        });
    }
    for (name, opts, writer) in [
        ("hot read", LockOptions::read(), false),
        ("hot read-groups", LockOptions::read().cohort_order(), false),
        ("hot read+write", LockOptions::read(), true),
        (
            "hot read-groups+write",
            LockOptions::read().cohort_order(),
            true,
        ),
        ("hot semaphore(4)", LockOptions::semaphore(4), false),
    ] {
        scenarios.push(Scenario {
            name: format!("{name} tasks=64 hold=1ms"),
            tasks: 64,
            keys: 1,
            hold: Duration::from_millis(1),
            opts,
            writer,
            managers: 2,
            cohorts: true,
        });
    }

    let backend = if memory { "memory" } else { "redis" };
    println!("tower-lock load, {backend} backend, {secs} s per scenario, 2 managers unless named");
    if let Some(rtt) = rtt {
        println!("PING round trip (median of 1000): {rtt:.1?}");
    }
    println!(
        "{:<52} {:>9} {:>7} {:>7} {:>6} {:>6} {:>10} {:>10} {:>9} {:>6} {:>9} {:>6} {:>9} {:>10} {:>10}",
        "scenario",
        "acq/s",
        "min",
        "max",
        "Jain",
        "share",
        "wait p50",
        "wait p99",
        "hold",
        "busy",
        "hand-off",
        "/RTT",
        "p99",
        "Redis/acq",
        "client/acq"
    );
    for s in scenarios {
        if !filters.iter().all(|f| s.name.contains(f.as_str())) {
            continue;
        }
        let cpu_before = redis_cpu(url.as_deref()).await;
        let client_before = client_cpu();
        let pair = &managers[usize::from(!s.cohorts)];
        let writer = s.writer.then(|| write_every_10ms(pair[1].clone()));
        let r = run(pair, &s, run_for).await;
        let writes = match writer {
            Some((stop, task)) => {
                stop.store(true, Ordering::Relaxed);
                Some(task.await?)
            }
            None => None,
        };
        let client_after = client_cpu();
        let cpu_after = redis_cpu(url.as_deref()).await;
        // Redis's CPU time (user + system) per acquisition, everything it did meanwhile included
        let per_acquisition = match (cpu_before, cpu_after) {
            (Some(before), Some(after)) if r.count > 0 => {
                format!("{:.1?}", after.saturating_sub(before) / r.count as u32)
            }
            _ => "-".to_owned(),
        };
        // this process's CPU time per acquisition: the two managers and the tasks driving them
        let client_per_acquisition = match (client_before, client_after) {
            (Some(before), Some(after)) if r.count > 0 => {
                format!("{:.1?}", after.saturating_sub(before) / r.count as u32)
            }
            _ => "-".to_owned(),
        };
        let rate = r.count as f64 / run_for.as_secs_f64();
        // One hot key is held by one task at a time: each acquisition is a hold and a hand-off.
        let (busy, hand_off, ratio, hand_off_p99) = match (r.hand_off, rate > 0.0) {
            (Some((hand_off, p99)), true) => {
                let ratio = rtt.map_or("-".to_owned(), |rtt| {
                    format!("{:.2}", hand_off.as_secs_f64() / rtt.as_secs_f64())
                });
                let busy = format!("{:.0}%", rate * r.hold.as_secs_f64() * 100.0);
                (busy, format!("{hand_off:.1?}"), ratio, format!("{p99:.1?}"))
            }
            _ => (
                "-".to_owned(),
                "-".to_owned(),
                "-".to_owned(),
                "-".to_owned(),
            ),
        };
        println!(
            "{:<52} {:>9.0} {:>7} {:>7} {:>6.3} {:>6} {:>10.1?} {:>10.1?} {:>9} {:>6} {:>9} {:>6} {:>9} {:>10} {:>10}",
            s.name,
            rate,
            r.min,
            r.max,
            r.jain,
            r.share.map_or("-".to_owned(), |share| format!("{:.0}%", share * 100.0)),
            r.p50,
            r.p99,
            format!("{:.1}µs", r.hold.as_secs_f64() * 1e6),
            busy,
            hand_off,
            ratio,
            hand_off_p99,
            per_acquisition,
            client_per_acquisition
        );
        if let Some(mut waits) = writes {
            waits.sort();
            let at = |q: f64| waits[((waits.len() as f64 * q) as usize).min(waits.len() - 1)];
            println!(
                "  the writer: {} writes, wait p50 {:.1?}, p99 {:.1?}",
                waits.len(),
                at(0.5),
                at(0.99)
            );
        }
    }
    drop(server);
    Ok(())
}

struct Outcome {
    count: u64,
    min: u64,
    max: u64,
    jain: f64,
    p50: Duration,
    p99: Duration,
    /// Mean time from acquire returning to release being called.
    hold: Duration,
    /// One hot key: the time from a holder calling release to the next acquire returning, median
    /// and p99.
    hand_off: Option<(Duration, Duration)>,
    /// The first manager's share of the acquisitions (two managers).
    share: Option<f64>,
}

async fn run(managers: &[LockManager; 2], s: &Scenario, run_for: Duration) -> Outcome {
    let stop = Arc::new(AtomicBool::new(false));
    // One hot key: when its holder last called release, in ns since `start`, plus one (0: never).
    let start = Instant::now();
    let released = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for t in 0..s.tasks {
        let m = managers[t % s.managers].clone();
        let (stop, opts, hold, keys) = (stop.clone(), s.opts, s.hold, s.keys);
        let released = released.clone();
        tasks.push(tokio::spawn(async move {
            let timer = IoTimer::new().expect("timerfd");
            let since_start = || start.elapsed().as_nanos() as u64;
            let mut hand_offs = Vec::new();
            let mut waits = Vec::new();
            let mut held = Duration::ZERO;
            let mut rng = t as u64 * 0x9e37_79b9_7f4a_7c15 + 1;
            while !stop.load(Ordering::Relaxed) {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                let key = format!("load:{}", rng % keys as u64);
                let started = Instant::now();
                let guard = m.acquire(&key, &opts).await.expect("acquire");
                let acquired = Instant::now();
                waits.push(acquired.duration_since(started));
                let last_release = released.load(Ordering::Acquire);
                // reads hold the key together: a release hands nothing to the next read
                let handed_over = keys == 1 && opts.mode_value() != Mode::Read;
                if handed_over && last_release != 0 {
                    hand_offs.push(Duration::from_nanos(since_start() - (last_release - 1)));
                }
                if !hold.is_zero() {
                    timer.sleep(hold).await.expect("timerfd");
                }
                held += acquired.elapsed();
                released.store(since_start() + 1, Ordering::Release);
                guard.release().await.expect("release");
            }
            (waits, held, hand_offs)
        }));
    }
    tokio::time::sleep(run_for).await;
    stop.store(true, Ordering::Relaxed);
    let mut counts = Vec::new();
    let mut by_manager = [0u64; 2];
    let mut waits = Vec::new();
    let mut held = Duration::ZERO;
    let mut hand_offs = Vec::new();
    for t in tasks {
        let (w, h, o) = t.await.expect("task");
        by_manager[counts.len() % s.managers] += w.len() as u64;
        counts.push(w.len() as u64);
        waits.extend(w);
        held += h;
        hand_offs.extend(o);
    }
    waits.sort();
    hand_offs.sort();
    let sum: f64 = counts.iter().map(|&c| c as f64).sum();
    let squares: f64 = counts.iter().map(|&c| (c as f64).powi(2)).sum();
    let pick =
        |q: f64| waits.get(((waits.len() as f64 * q) as usize).min(waits.len().saturating_sub(1)));
    Outcome {
        count: counts.iter().sum(),
        min: counts.iter().copied().min().unwrap_or(0),
        max: counts.iter().copied().max().unwrap_or(0),
        jain: if squares == 0.0 {
            0.0
        } else {
            sum * sum / (counts.len() as f64 * squares)
        },
        p50: pick(0.50).copied().unwrap_or_default(),
        p99: pick(0.99).copied().unwrap_or_default(),
        hold: held / (waits.len().max(1) as u32),
        share: (s.managers == 2 && sum > 0.0).then(|| by_manager[0] as f64 / sum),
        hand_off: hand_offs.get(hand_offs.len() / 2).map(|&median| {
            let p99 = hand_offs[(hand_offs.len() * 99 / 100).min(hand_offs.len() - 1)];
            (median, p99)
        }),
    }
}

/// A task that takes a write hold of the hot key every 10 ms until stopped; its waits come back.
fn write_every_10ms(
    manager: LockManager,
) -> (Arc<AtomicBool>, tokio::task::JoinHandle<Vec<Duration>>) {
    let stop = Arc::new(AtomicBool::new(false));
    let stopped = stop.clone();
    let task = tokio::spawn(async move {
        let mut waits = vec![];
        while !stopped.load(Ordering::Relaxed) {
            tokio::time::sleep(Duration::from_millis(10)).await;
            let started = Instant::now();
            let guard = manager.acquire("load:0", &LockOptions::write()).await;
            waits.push(started.elapsed());
            guard.expect("write").release().await.expect("release");
        }
        waits
    });
    (stop, task)
}

/// The CPU time redis-server has used (`used_cpu_user` + `used_cpu_sys` of `INFO cpu`).
async fn redis_cpu(url: Option<&str>) -> Option<Duration> {
    let mut conn = redis::Client::open(url?)
        .ok()?
        .get_multiplexed_async_connection()
        .await
        .ok()?;
    let info: String = redis::cmd("INFO")
        .arg("cpu")
        .query_async(&mut conn)
        .await
        .ok()?;
    let seconds: f64 = info
        .lines()
        .filter_map(|line| line.split_once(':'))
        .filter(|(field, _)| matches!(*field, "used_cpu_user" | "used_cpu_sys"))
        .filter_map(|(_, value)| value.trim().parse::<f64>().ok())
        .sum();
    Some(Duration::from_secs_f64(seconds))
}

async fn ping_rtt(url: &str) -> redis::RedisResult<Duration> {
    let client = redis::Client::open(url)?;
    let mut conn = client.get_multiplexed_async_connection().await?;
    let mut samples = Vec::new();
    for _ in 0..1000 {
        let started = Instant::now();
        let _: String = redis::cmd("PING").query_async(&mut conn).await?;
        samples.push(started.elapsed());
    }
    samples.sort();
    Ok(samples[samples.len() / 2])
}

/// The CPU time this process has used (user + system, all threads), from `/proc/self/stat` (in
/// Linux's fixed USER_HZ of 100 ticks a second); `None` where there is no such file.
fn client_cpu() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // the fields after the command name, which is in parentheses and may hold spaces
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    // utime and stime are the 14th and 15th fields of the line, the 12th and 13th after the name
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    Some(Duration::from_millis(ticks * 10))
}
