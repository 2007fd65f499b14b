//! Lock latency against Redis, as ratios to Redis's PING round trip measured in the same run.
//!
//! ```text
//! cargo run --release --example latency            # starts its own redis-server
//! REDIS_URL=redis://127.0.0.1:6379 cargo run --release --example latency
//! ```
//!
//! Prints medians and p99 of: PING round trip, uncontended acquire+release (exclusive and fair;
//! beside them, in the same loop, the cycle of a hand-rolled lock, `SET NX PX` and a
//! compare-and-delete script, and rslock's cycle, the same protocol through a Redlock crate on one
//! server; the four take turns at running first after the PING), exclusive
//! and fair hand-off (holder calls release -> another waiting request's acquire returns), and the
//! Redis commands one uncontended acquire+release costs. Hand-offs are measured two ways:
//!
//! - **under load**: 8 requests of two managers queue for one lock, and each releases as soon as it
//!   acquires, so every release finds waiters queued and the machine busy;
//! - **after idle**: a single waiter has idled for a few milliseconds before the release, so a PING
//!   after the same idle is measured beside it: on a virtual machine waking an idle CPU costs more
//!   than a round trip, and a Lua script run on cold caches costs several (the last rows time
//!   scripts of 1 and 10 calls after the same idle).

#[path = "common/setnx.rs"]
mod setnx;
#[path = "../tests/support/mod.rs"]
mod support;

use support::stats::{median, p99, ratio};

use std::sync::{Arc, LazyLock, Mutex};
use std::time::{Duration, Instant};

use tower_lock::{LockManager, LockOptions};

const SAMPLES: usize = 2000;
const HANDOFFS: usize = 500;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (url, _server) = match std::env::var("REDIS_URL") {
        Ok(url) => (url, None),
        Err(_) => {
            let server = support::RedisServer::start();
            (server.url(), Some(server))
        }
    };
    let client = redis::Client::open(url.as_str())?;
    let conn = client.get_multiplexed_async_connection().await?;
    let m = LockManager::redis(&url).await?;
    let other = LockManager::redis(&url).await?;
    let opts = LockOptions::exclusive();
    let rslock = rslock::LockManager::new(vec![url.as_str()]);

    // PING and acquire+release alternate, so both see the same machine at the same moment.
    let mut ping = Vec::with_capacity(SAMPLES);
    let mut uncontended = Vec::with_capacity(SAMPLES);
    let mut uncontended_fair = Vec::with_capacity(SAMPLES);
    let mut setnx = Vec::with_capacity(SAMPLES);
    let mut rslocks = Vec::with_capacity(SAMPLES);
    for i in 0..SAMPLES + SAMPLES / 10 {
        let p = time(ping_once(&conn)).await;
        // The four cycles take turns at running first: the first after the PING pays for the
        // connection it found idle, and no variant should always be the one that pays.
        let (mut u, mut f, mut n, mut r) = Default::default();
        for turn in 0..4 {
            match (i + turn) % 4 {
                0 => u = time(lock_cycle(&m, "bench:uncontended", &opts)).await,
                1 => f = time(lock_cycle(&m, "bench:fair", &LockOptions::fair())).await,
                2 => n = time(setnx_cycle(&conn)).await,
                _ => r = time(rslock_cycle(&rslock)).await,
            }
        }
        if i >= SAMPLES / 10 {
            ping.push(p);
            uncontended.push(u);
            uncontended_fair.push(f);
            setnx.push(n);
            rslocks.push(r);
        }
    }

    let before = script_calls(&conn).await?;
    lock_cycle(&m, "bench:uncontended", &opts).await;
    let calls = script_calls(&conn).await? - before;

    // Acquire, then drop the guard: the release goes out in the background, as it does when a
    // guard goes out of scope or a LockLayer's response is sent. Each sample starts once the last
    // background release has landed, so it does not overlap the next PING.
    let mut dropped = Vec::with_capacity(SAMPLES);
    let mut dropped_ping = Vec::with_capacity(SAMPLES);
    for _ in 0..SAMPLES {
        while lock_exists(&conn, "{tower-lock:bench:dropped}").await? {
            tokio::task::yield_now().await;
        }
        dropped_ping.push(time(ping_once(&conn)).await);
        dropped.push(
            time(async {
                drop(m.acquire("bench:dropped", &opts).await.expect("acquire"));
            })
            .await,
        );
    }

    let hot = loaded_handoffs(&m, &other, LockOptions::exclusive()).await;
    let fair_hot = loaded_handoffs(&m, &other, LockOptions::fair()).await;
    let (handoff, idle_ping) = handoffs(&m, &other, &conn, LockOptions::exclusive()).await;
    let (fair_handoff, fair_idle_ping) = handoffs(&m, &other, &conn, LockOptions::fair()).await;

    let scripts = cold_scripts(&conn).await;

    let rtt = median(&ping);
    println!("tower-lock latency, Redis at {url}, {SAMPLES} samples, {HANDOFFS} hand-offs");
    println!(
        "{:<48} {:>9} {:>9} {:>7} {:>8}",
        "", "median", "p99", "xRTT", "p99xRTT"
    );
    for (name, s) in [
        ("PING round trip (hot loop) = RTT", &ping),
        ("uncontended acquire+release", &uncontended),
        ("uncontended fair acquire+release", &uncontended_fair),
        ("hand-rolled SET NX + compare-and-delete", &setnx),
        ("rslock lock + unlock", &rslocks),
        ("PING (acquire+drop run)", &dropped_ping),
        ("uncontended acquire+drop (background release)", &dropped),
        ("exclusive hand-off under load", &hot),
        ("fair hand-off under load", &fair_hot),
        ("PING after 2 ms idle", &idle_ping),
        ("exclusive hand-off after 2 ms idle", &handoff),
        ("PING after 2 ms idle (fair run)", &fair_idle_ping),
        ("fair hand-off after 2 ms idle", &fair_handoff),
        ("script of 10 redis.calls, hot", &scripts.ten_hot),
        ("PING after 2 ms idle (script run)", &scripts.ping),
        ("script `return 1` after 2 ms idle", &scripts.trivial),
        ("script of 10 redis.calls after 2 ms idle", &scripts.ten),
    ] {
        println!(
            "{name:<48} {:>9.1?} {:>9.1?} {:>7.2} {:>8.2}",
            median(s),
            p99(s),
            ratio(median(s), rtt),
            ratio(p99(s), rtt),
        );
    }
    println!(
        "hand-off after idle / PING after the same idle: exclusive {:.2}, fair {:.2}",
        ratio(median(&handoff), median(&idle_ping)),
        ratio(median(&fair_handoff), median(&fair_idle_ping))
    );
    // a free lock is taken on the plain path, without a script: the release is the one script
    println!("script calls per uncontended acquire+release: {calls} (2 round trips either way)");
    Ok(())
}

/// What a script costs the server on a CPU that has just woken up, beside a PING that pays the same
/// wake-up (a hand-off after idle runs a release script on such a CPU).
struct ColdScripts {
    ping: Vec<Duration>,
    trivial: Vec<Duration>,
    ten: Vec<Duration>,
    ten_hot: Vec<Duration>,
}

async fn cold_scripts(conn: &redis::aio::MultiplexedConnection) -> ColdScripts {
    let trivial = redis::Script::new("return 1");
    let ten = redis::Script::new(
        "for i = 1, 9 do redis.call('HSET', KEYS[1], 'f' .. i, i) end \
         redis.call('DEL', KEYS[1]) return 1",
    );
    let run = |script: &redis::Script| {
        let (mut conn, script) = (conn.clone(), script.clone());
        async move {
            let call = script.key("bench:script");
            let _: i64 = call.invoke_async(&mut conn).await.expect("script");
        }
    };
    let idle = || tokio::time::sleep(Duration::from_millis(2));
    let mut out = ColdScripts {
        ping: Vec::new(),
        trivial: Vec::new(),
        ten: Vec::new(),
        ten_hot: Vec::new(),
    };
    run(&trivial).await; // loads both scripts
    run(&ten).await;
    for _ in 0..HANDOFFS {
        idle().await;
        out.ping.push(time(ping_once(conn)).await);
        idle().await;
        out.trivial.push(time(run(&trivial)).await);
        idle().await;
        out.ten.push(time(run(&ten)).await);
        out.ten_hot.push(time(run(&ten)).await);
    }
    out
}

/// An uncontended acquire of `opts` on its own key, then an awaited release.
async fn lock_cycle(m: &LockManager, key: &str, opts: &LockOptions) {
    let g = m.acquire(key, opts).await.expect("acquire");
    g.release().await.expect("release");
}

async fn time(f: impl std::future::Future<Output = ()>) -> Duration {
    let start = Instant::now();
    f.await;
    start.elapsed()
}

async fn ping_once(conn: &redis::aio::MultiplexedConnection) {
    let mut conn = conn.clone();
    let _: String = redis::cmd("PING")
        .query_async(&mut conn)
        .await
        .expect("PING");
}

/// 8 requests, half of each manager, queue for one lock and release as soon as they acquire; each
/// sample runs from one holder calling release to ANOTHER request's acquire returning (an exclusive
/// holder may win its own lock back at once: that is no hand-off and is not counted).
async fn loaded_handoffs(a: &LockManager, b: &LockManager, opts: LockOptions) -> Vec<Duration> {
    const TASKS: usize = 8;
    let last_release: Arc<Mutex<Option<(usize, Instant)>>> = Arc::default();
    let samples: Arc<Mutex<Vec<Duration>>> = Arc::default();
    let mut tasks = Vec::new();
    for t in 0..TASKS {
        let m = if t % 2 == 0 { a.clone() } else { b.clone() };
        let (last_release, samples) = (last_release.clone(), samples.clone());
        tasks.push(tokio::spawn(async move {
            loop {
                let g = m.acquire("bench:loaded", &opts).await.expect("acquire");
                let acquired = Instant::now();
                let previous = last_release.lock().unwrap().take();
                let done = {
                    let mut samples = samples.lock().unwrap();
                    if let Some((_, released)) = previous.filter(|(holder, _)| *holder != t) {
                        samples.push(acquired.duration_since(released));
                    }
                    samples.len() >= SAMPLES
                };
                if done {
                    g.release().await.expect("release");
                    return;
                }
                *last_release.lock().unwrap() = Some((t, Instant::now()));
                g.release().await.expect("release");
            }
        }));
    }
    for t in tasks {
        t.await.expect("hand-off task");
    }
    let samples = samples.lock().unwrap().clone();
    samples
}

/// A waiter in `b` is queued behind a holder in `a`; after 2 ms idle, time a PING, idle 2 ms again,
/// then time from the holder's release call to the waiter's acquire returning.
async fn handoffs(
    a: &LockManager,
    b: &LockManager,
    conn: &redis::aio::MultiplexedConnection,
    opts: LockOptions,
) -> (Vec<Duration>, Vec<Duration>) {
    let (mut handoff, mut idle_ping) = (Vec::new(), Vec::new());
    for _ in 0..HANDOFFS {
        let held = a.acquire("bench:handoff", &opts).await.expect("holder");
        let waiter = {
            let b = b.clone();
            tokio::spawn(async move {
                let g = b.acquire("bench:handoff", &opts).await.expect("waiter");
                let at = Instant::now();
                g.release().await.expect("release");
                at
            })
        };
        while b.waiting() == 0 {
            tokio::task::yield_now().await;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
        idle_ping.push(time(ping_once(conn)).await);
        tokio::time::sleep(Duration::from_millis(2)).await;
        let released = Instant::now();
        held.release().await.expect("release");
        let acquired = waiter.await.expect("waiter task");
        handoff.push(acquired.duration_since(released));
    }
    (handoff, idle_ping)
}

async fn lock_exists(
    conn: &redis::aio::MultiplexedConnection,
    key: &str,
) -> redis::RedisResult<bool> {
    let mut conn = conn.clone();
    redis::cmd("EXISTS").arg(key).query_async(&mut conn).await
}

/// Script calls (EVALSHA + EVAL) the server has run so far.
async fn script_calls(conn: &redis::aio::MultiplexedConnection) -> redis::RedisResult<u64> {
    let mut conn = conn.clone();
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(&mut conn)
        .await?;
    Ok(info
        .lines()
        .filter(|l| l.starts_with("cmdstat_evalsha:") || l.starts_with("cmdstat_eval:"))
        .filter_map(|l| {
            l.split("calls=")
                .nth(1)?
                .split(',')
                .next()?
                .parse::<u64>()
                .ok()
        })
        .sum())
}

/// One cycle of the lock a handler would take by hand (`common/setnx.rs`).
async fn setnx_cycle(conn: &redis::aio::MultiplexedConnection) {
    static RELEASE: LazyLock<redis::Script> = LazyLock::new(setnx::release_script);
    let mut conn = conn.clone();
    (setnx::cycle(&mut conn, &RELEASE, "bench:setnx").await).expect("hand-rolled cycle");
}

/// One cycle of rslock's lock on one server: `lock` (`SET NX PX`), then `unlock` (a
/// compare-and-delete script).
async fn rslock_cycle(rslock: &rslock::LockManager) {
    let hold = rslock.lock("bench:rslock", Duration::from_secs(30)).await;
    rslock.unlock(&hold.expect("rslock lock")).await;
}
