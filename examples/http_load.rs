//! Requests per second through real HTTP: two replica processes of an axum service, each with its
//! own lock manager, loaded by `wrk`, with Redis as the store.
//!
//! ```text
//! cargo run --release --example http_load              # K = 100 and K = 1, every variant, twice
//! HTTP_LOAD_KEYS=100 HTTP_LOAD_SECS=5 cargo run --release --example http_load
//! HTTP_LOAD_VARIANTS=layer-fair,rslock cargo run --release --example http_load   # some variants
//! HTTP_LOAD_RUNS=8 HTTP_LOAD_SECS=3 HTTP_LOAD_KEYS=100 cargo run --release --example http_load
//! ```
//!
//! The service: `PUT /accounts/{id}` reads the balance from Redis (`GET`), waits `HTTP_LOAD_HOLD_MS`
//! (default 1 ms, a database round trip) and writes balance + 1 (`SET`). Variants: the
//! `LockLayer` in exclusive mode and in fair mode, a hand-rolled lock taken in the handler
//! (`SET NX PX`, retried every 2 ms up to 1,000 times, released by a compare-and-delete script),
//! rslock's lock taken in the handler (the same protocol through a Redlock crate on one server, up
//! to 1,000 retries after random delays below 2 ms), and no lock (to show the updates it loses).
//! Two `wrk -t1 -c32` load the two replicas at once, over accounts drawn uniformly from K;
//! afterwards the example sums the balances and compares them with the deposits the service
//! answered 200 (it counts them in Redis, in the pipeline of its write), and prints the CPU time
//! per request of Redis (`INFO cpu` before and after the load) and of the two replica processes
//! (`/proc/<pid>/stat`), and the replicas' context switches per request (their threads'
//! `/proc/<pid>/task/*/status`).
//!
//! Each K is measured `HTTP_LOAD_RUNS` times (default 2), the variants in the order given. When
//! rslock is among the variants, the example then prints each other variant's requests/s and p99
//! divided by rslock's at its place in the sequence, read on the line between the rslock runs just
//! before and just after it (mean ± standard error, least–greatest): the VM's speed drifts by tens
//! of percent within a minute, and a run's ratio to one neighbour carries that drift, where the
//! line through both sides cancels a steady one. Two variants (`layer-fair,rslock`) alternate
//! run by run, and each run of the layer sits between two of rslock's.
//!
//! `HTTP_LOAD_REDIS_CPU=1` gives Redis a CPU of its own, as a server on another machine has: Redis
//! is pinned to CPU 1, the replicas and wrk to the other CPUs (`taskset`). By default all of them
//! share every CPU, and Redis's CPU time per request is taken from the replicas.
//! Needs `wrk` (`apt-get install wrk`) and `redis-server`.

#[path = "common/bracket.rs"]
mod bracket;
// the hand-rolled lock's release script (its whole cycle is the latency and cycle examples')
#[allow(dead_code)]
#[path = "common/setnx.rs"]
mod setnx;
#[path = "../tests/support/mod.rs"]
mod support;

use std::process::{Child, Command, Stdio};
use std::sync::LazyLock;
use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::put;
use axum::Router;
use redis::aio::MultiplexedConnection;
use redis::AsyncCommands;
use tower_lock::{key, LockLayer, LockManager, LockOptions};

const VARIANTS: [&str; 5] = ["layer-exclusive", "layer-fair", "setnx", "rslock", "none"];

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    if args.next().as_deref() == Some("serve") {
        let (variant, port, url) = (args.next(), args.next(), args.next());
        let (Some(variant), Some(port), Some(url)) = (variant, port, url) else {
            return Err("serve VARIANT PORT REDIS_URL".into());
        };
        return serve(&variant, port.parse()?, &url).await;
    }
    let env = |name: &str, default: u64| -> u64 {
        std::env::var(name)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    let secs = env("HTTP_LOAD_SECS", 10);
    let key_counts = match std::env::var("HTTP_LOAD_KEYS") {
        Ok(k) => vec![k.parse()?],
        Err(_) => vec![100, 1],
    };
    let server = support::RedisServer::start();
    let pinning = Pinning::from_env(&server)?;
    println!(
        "two replicas, wrk -t1 -c32 -d{secs}s on each; hold {} ms",
        env("HTTP_LOAD_HOLD_MS", 1)
    );
    println!(
        "{:>4} {:<16} {:>9} {:>9} {:>9} {:>10} {:>12} {:>14} {:>14}",
        "K",
        "variant",
        "req/s",
        "p99 ms",
        "non-2xx",
        "lost",
        "Redis/req",
        "replicas/req",
        "switches/req"
    );
    let variants: Vec<String> = match std::env::var("HTTP_LOAD_VARIANTS") {
        Ok(list) => list.split(',').map(str::to_owned).collect(),
        Err(_) => VARIANTS.map(str::to_owned).to_vec(),
    };
    if let Some(unknown) = variants.iter().find(|v| !VARIANTS.contains(&v.as_str())) {
        return Err(format!("unknown variant {unknown:?}; variants: {VARIANTS:?}").into());
    }
    let runs = env("HTTP_LOAD_RUNS", 2);
    for keys in key_counts {
        let mut done = Vec::new();
        for run in 1..=runs {
            for variant in &variants {
                let r = measure(&server, &pinning, variant, keys, secs).await?;
                println!(
                    "{keys:>4} {variant:<16} {:>9.0} {:>9.1} {:>9} {:>10} {:>10.1}µs {:>12.1}µs {:>14.2}  (run {run})",
                    r.rate, r.p99_ms, r.failed, r.lost, r.redis_us, r.replicas_us, r.switches
                );
                done.push(bracket::Run {
                    variant: variant.clone(),
                    rate: r.rate,
                    p99_ms: r.p99_ms,
                });
            }
        }
        print_bracketed(keys, &done);
    }
    Ok(())
}

/// Each variant's requests/s and p99 as ratios to rslock's at its place, read between rslock's
/// runs on both sides of it (`common/bracket.rs`): the drift of the machine cancels.
fn print_bracketed(keys: u64, runs: &[bracket::Run]) {
    for b in bracket::bracket(runs, "rslock") {
        let (rate, p99) = (bracket::Spread::of(&b.rates), bracket::Spread::of(&b.p99s));
        println!(
            "{keys:>4} {:<16} ÷ rslock on both sides, {} runs: req/s {:.3} ± {:.3} ({:.2}–{:.2}), \
             p99 {:.2} ({:.2}–{:.2})",
            b.variant,
            b.rates.len(),
            rate.mean,
            rate.standard_error,
            rate.min,
            rate.max,
            p99.mean,
            p99.min,
            p99.max
        );
    }
}

/// What one variant did.
struct Outcome {
    rate: f64,
    p99_ms: f64,
    failed: u64,
    /// Deposits answered 200 (counted by the service) that are missing from the balances.
    lost: i64,
    /// Redis's CPU time (user + system) per request wrk counted, in µs.
    redis_us: f64,
    /// The replica processes' CPU time (user + system) per request, in µs.
    replicas_us: f64,
    /// The replica processes' context switches (their threads', voluntary or not) per request.
    switches: f64,
}

async fn measure(
    server: &support::RedisServer,
    pinning: &Pinning,
    variant: &str,
    keys: u64,
    secs: u64,
) -> Result<Outcome, Box<dyn std::error::Error>> {
    server.cmd(&["FLUSHALL"]);
    let ports = [support::free_port(), support::free_port()];
    let mut replicas = Replicas(Vec::new());
    for port in ports {
        replicas.0.push(
            pinning
                .command(std::env::current_exe()?)
                .args(["serve", variant, &port.to_string(), &server.url()])
                .stdout(Stdio::null())
                .spawn()?,
        );
    }
    for port in ports {
        wait_for_port(port).await;
    }
    let script = std::env::temp_dir().join(format!("http_load_{}.lua", std::process::id()));
    std::fs::write(
        &script,
        format!(
            "init = function(args) math.randomseed(tonumber(args[1])) end\n\
             request = function() return wrk.format('PUT', '/accounts/' .. math.random({keys})) end\n\
             done = function(summary, latency, requests)\n\
             io.write(string.format('RESULT %d %d %d\\n', summary.requests, \
             summary.errors.status, latency:percentile(99)))\n\
             end\n"
        ),
    )?;
    let cpu_before = redis_cpu(server);
    let replicas_before: f64 = replicas.0.iter().map(process_cpu).sum();
    let switches_before: u64 = replicas.0.iter().map(context_switches).sum();
    let loads: Vec<Child> = ports
        .iter()
        .map(|port| {
            pinning
                .command("wrk")
                .args(["-t1", "-c32", &format!("-d{secs}s"), "-s"])
                .arg(&script)
                .arg(format!("http://127.0.0.1:{port}"))
                // each wrk draws its own accounts: unseeded, both would draw the same ones
                .args(["--", &port.to_string()])
                .stdout(Stdio::piped())
                .spawn()
                .map_err(|err| format!("cannot run wrk ({err}): apt-get install wrk"))
        })
        .collect::<Result<_, _>>()?;
    let (mut requests, mut failed, mut p99_us) = (0u64, 0u64, 0u64);
    for load in loads {
        let out = load.wait_with_output()?;
        let text = String::from_utf8_lossy(&out.stdout);
        let line = (text.lines().find_map(|l| l.strip_prefix("RESULT ")))
            .ok_or_else(|| format!("no wrk result: {text}"))?;
        let fields: Vec<u64> = line
            .split_whitespace()
            .filter_map(|f| f.parse().ok())
            .collect();
        requests += fields[0];
        failed += fields[1];
        p99_us = p99_us.max(fields[2]);
    }
    let redis_cpu_used = redis_cpu(server) - cpu_before;
    let replicas_cpu_used = replicas.0.iter().map(process_cpu).sum::<f64>() - replicas_before;
    let switches = replicas.0.iter().map(context_switches).sum::<u64>() - switches_before;
    // let requests still in flight when wrk stopped finish before reading the balances
    tokio::time::sleep(Duration::from_millis(500)).await;
    drop(replicas);
    let mut total = 0i64;
    for id in 1..=keys {
        let balance = server.cmd(&["GET", &format!("balance:{id}")]);
        total += balance.as_int().unwrap_or(0);
    }
    let served = server.cmd(&["GET", "served"]).as_int().unwrap_or(0);
    let _ = std::fs::remove_file(&script);
    Ok(Outcome {
        rate: requests as f64 / secs as f64,
        p99_ms: p99_us as f64 / 1000.0,
        failed,
        lost: served - total,
        redis_us: redis_cpu_used * 1e6 / requests.max(1) as f64,
        replicas_us: replicas_cpu_used * 1e6 / requests.max(1) as f64,
        switches: switches as f64 / requests.max(1) as f64,
    })
}

/// Where the processes of a run may run: with `HTTP_LOAD_REDIS_CPU=N`, Redis on CPU N alone and
/// the replicas and wrk on the other CPUs; else anywhere.
struct Pinning {
    /// The CPUs left to the replicas and wrk (a `taskset` list), when Redis has one of its own.
    others: Option<String>,
}

impl Pinning {
    /// Read `HTTP_LOAD_REDIS_CPU`, and pin `server` (all its threads) to that CPU.
    fn from_env(server: &support::RedisServer) -> Result<Pinning, Box<dyn std::error::Error>> {
        let Ok(cpu) = std::env::var("HTTP_LOAD_REDIS_CPU") else {
            return Ok(Pinning { others: None });
        };
        let cpu: usize = cpu.parse()?;
        let cpus = std::thread::available_parallelism()?.get();
        let others: Vec<String> = (0..cpus)
            .filter(|c| *c != cpu)
            .map(|c| c.to_string())
            .collect();
        if cpu >= cpus || others.is_empty() {
            return Err(format!("HTTP_LOAD_REDIS_CPU={cpu}: needs another CPU of {cpus}").into());
        }
        let pid = server.pid().ok_or("redis-server has no process")?;
        let pinned = Command::new("taskset")
            .args(["-a", "-p", "-c", &cpu.to_string(), &pid.to_string()])
            .stdout(Stdio::null())
            .status()
            .map_err(|err| format!("cannot run taskset ({err})"))?;
        if !pinned.success() {
            return Err(format!("taskset could not pin redis-server to CPU {cpu}").into());
        }
        println!(
            "redis-server on CPU {cpu}; replicas and wrk on CPUs {}",
            others.join(",")
        );
        Ok(Pinning {
            others: Some(others.join(",")),
        })
    }

    /// A command that runs `program` where the run's other processes may run.
    fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        match &self.others {
            Some(cpus) => {
                let mut command = Command::new("taskset");
                command.args(["-c", cpus]).arg(program);
                command
            }
            None => Command::new(program),
        }
    }
}

/// The replica processes of one variant, killed when it ends, however it ends.
struct Replicas(Vec<Child>);

impl Drop for Replicas {
    fn drop(&mut self) {
        for replica in &mut self.0 {
            let _ = replica.kill();
            let _ = replica.wait();
        }
    }
}

/// The CPU time redis-server has used, in seconds (`used_cpu_user` + `used_cpu_sys`).
fn redis_cpu(server: &support::RedisServer) -> f64 {
    let info = server.info("cpu");
    (info.lines().filter_map(|line| line.split_once(':')))
        .filter(|(field, _)| matches!(*field, "used_cpu_user" | "used_cpu_sys"))
        .filter_map(|(_, value)| value.trim().parse::<f64>().ok())
        .sum()
}

/// The CPU time a child process has used, in seconds (`utime` + `stime` of `/proc/<pid>/stat`, in
/// clock ticks of 1/100 s); 0 where there is no such file.
fn process_cpu(child: &Child) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", child.id())).unwrap_or_default();
    // the fields after the command name, which is in parentheses and may hold spaces
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map_or(vec![], |(_, rest)| rest.split_whitespace().collect());
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // utime and stime are the 14th and 15th fields: the 12th and 13th after the name
    (ticks(11) + ticks(12)) / 100.0
}

/// The context switches of a child process's threads so far, voluntary or not
/// (`/proc/<pid>/task/*/status`); 0 where there are no such files.
fn context_switches(child: &Child) -> u64 {
    let tasks = std::fs::read_dir(format!("/proc/{}/task", child.id()));
    (tasks.into_iter().flatten().flatten())
        .filter_map(|task| std::fs::read_to_string(task.path().join("status")).ok())
        .flat_map(|status| {
            (status.lines())
                .filter(|line| line.contains("ctxt_switches:"))
                .filter_map(|line| line.split_whitespace().nth(1)?.parse::<u64>().ok())
                .collect::<Vec<_>>()
        })
        .sum()
}

async fn wait_for_port(port: u16) {
    for _ in 0..500 {
        if tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_ok()
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("replica on port {port} did not start");
}

/// One replica: the deposit service with the lock `variant`, on `port`.
async fn serve(variant: &str, port: u16, url: &str) -> Result<(), Box<dyn std::error::Error>> {
    let hold = Duration::from_millis(
        std::env::var("HTTP_LOAD_HOLD_MS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(1),
    );
    let redis = redis::Client::open(url)?
        .get_multiplexed_async_connection()
        .await?;
    let guard = match variant {
        "setnx" => HandlerLock::SetNx,
        "rslock" => {
            let mut rslock = rslock::LockManager::new(vec![url]);
            rslock.set_retry(1000, Duration::from_millis(2));
            HandlerLock::Rslock(rslock)
        }
        _ => HandlerLock::None,
    };
    let app = Router::new()
        .route("/accounts/{id}", put(deposit))
        .with_state((redis.clone(), hold, guard));
    let app = match variant {
        "layer-exclusive" | "layer-fair" => {
            let manager = LockManager::redis(url).await?;
            let opts = if variant == "layer-fair" {
                LockOptions::fair()
            } else {
                LockOptions::exclusive()
            };
            let layer = LockLayer::new(manager, key::pattern("/accounts/{id}"))
                .options(opts.wait_timeout(Duration::from_secs(30)));
            app.layer(layer)
        }
        _ => app,
    };
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
    axum::serve(listener, app).await?;
    Ok(())
}

/// The lock a variant takes inside the handler, if any.
#[derive(Clone)]
enum HandlerLock {
    None,
    /// The hand-rolled `SET NX` lock.
    SetNx,
    /// rslock's lock.
    Rslock(rslock::LockManager),
}

type AppState = (MultiplexedConnection, Duration, HandlerLock);

/// Read the balance, wait `hold`, write it plus one; under the lock the handler takes, if any.
async fn deposit(
    State((mut redis, hold, guard)): State<AppState>,
    Path(id): Path<u64>,
) -> StatusCode {
    let lock = format!("lock:{id}");
    let token = uuid::Uuid::new_v4().to_string();
    let rslock_hold = match &guard {
        HandlerLock::None => None,
        HandlerLock::SetNx => match take(&mut redis, &lock, &token).await {
            true => None,
            false => return StatusCode::SERVICE_UNAVAILABLE,
        },
        HandlerLock::Rslock(rslock) => {
            match rslock.lock(lock.as_str(), Duration::from_secs(5)).await {
                Ok(hold) => Some(hold),
                Err(_) => return StatusCode::SERVICE_UNAVAILABLE,
            }
        }
    };
    let balance: i64 = redis.get(format!("balance:{id}")).await.unwrap_or(0);
    tokio::time::sleep(hold).await;
    // the deposit and the count of deposits answered 200, in one round trip
    let mut write = redis::pipe();
    write
        .set(format!("balance:{id}"), balance + 1)
        .incr("served", 1);
    let written: redis::RedisResult<()> = write.query_async(&mut redis).await;
    match (&guard, rslock_hold) {
        (HandlerLock::SetNx, _) => {
            // made once: a `Script` hashes its source when made
            static RELEASE: LazyLock<redis::Script> = LazyLock::new(setnx::release_script);
            let _: redis::RedisResult<i64> = RELEASE
                .key(&lock)
                .arg(&token)
                .invoke_async(&mut redis)
                .await;
        }
        (HandlerLock::Rslock(rslock), Some(hold)) => rslock.unlock(&hold).await,
        _ => {}
    }
    match written {
        Ok(()) => StatusCode::OK,
        Err(_) => StatusCode::INTERNAL_SERVER_ERROR,
    }
}
/// The hand-rolled lock: `SET lock token NX PX 5000`, retried every 2 ms up to 1,000 times.
async fn take(redis: &mut MultiplexedConnection, lock: &str, token: &str) -> bool {
    for _ in 0..1000 {
        let set: Option<String> = redis::cmd("SET")
            .arg(lock)
            .arg(token)
            .arg("NX")
            .arg("PX")
            .arg(5000)
            .query_async(redis)
            .await
            .unwrap_or(None);
        if set.is_some() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    false
}
