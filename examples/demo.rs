//! The README's first command: two replicas of an account service, without the lock and with it.
//!
//! ```text
//! cargo run --release --example demo                                   # in memory
//! REDIS_URL=redis://127.0.0.1:6379 cargo run --release --example demo  # on Redis
//! ```
//!
//! Two replicas of an axum account-balance service listen on loopback ports and share one account
//! store, which plays the remote database: a deposit reads the balance, awaits one "database round
//! trip", then writes the balance + 1, a non-atomic read-modify-write as real handlers do. A client
//! sends `REQUESTS` deposits over HTTP, `IN_FLIGHT` at a time, alternating replicas: half to a few
//! hot accounts, the rest spread over many cold ones. It runs once without a lock and once with a
//! `LockLayer` keyed by `/accounts/{id}`: in memory the replicas share one manager; on Redis each
//! replica has its own, as separate machines would. Lost updates = deposits answered 200 − money in
//! the store. Exit code 1 if the locked run lost any update, 2 on any error (a failed request too).

use std::collections::HashMap;
use std::io::IsTerminal;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{Request, StatusCode};
use axum::routing::put;
use axum::{Extension, Router};
use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::{connect::HttpConnector, Client};
use hyper_util::rt::TokioExecutor;
use tower::util::MapRequestLayer;
use tower_lock::{key, LockLayer, LockManager, LockOptions};

type Error = Box<dyn std::error::Error + Send + Sync>;
type HttpClient = Client<HttpConnector, Empty<Bytes>>;

const REQUESTS: usize = 6000;
const IN_FLIGHT: usize = 128;
const HOT_ACCOUNTS: u64 = 4;
const COLD_ACCOUNTS: u64 = 2000;
const DB_ROUND_TRIP: Duration = Duration::from_millis(1);
const WAIT_HEADER: &str = "x-lock-wait-us";

/// The shared "database" behind both replicas: account → balance.
#[derive(Clone, Default)]
struct Store(Arc<Mutex<HashMap<u64, u64>>>);

impl Store {
    fn read(&self, id: u64) -> u64 {
        *self.0.lock().expect("store").get(&id).unwrap_or(&0)
    }
    fn write(&self, id: u64, balance: u64) {
        self.0.lock().expect("store").insert(id, balance);
    }
    fn total(&self) -> u64 {
        self.0.lock().expect("store").values().sum()
    }
}

/// When the request reached its replica, stamped by a layer *outside* the lock layer.
#[derive(Clone, Copy)]
struct Arrived(Instant);

async fn deposit(
    State(store): State<Store>,
    Path(id): Path<u64>,
    Extension(Arrived(arrived)): Extension<Arrived>,
) -> ([(&'static str, String); 1], String) {
    // The handler runs *inside* the lock layer, so the time since the outer stamp is the wait for
    // the lock (plus routing, a few µs: the run without the lock measures that baseline).
    let waited = arrived.elapsed();
    let balance = store.read(id);
    tokio::time::sleep(DB_ROUND_TRIP).await; // another request may write meanwhile...
    store.write(id, balance + 1); // ...and this write erases its deposit, unless the lock is held
    let wait = waited.as_micros().to_string();
    ([(WAIT_HEADER, wait)], (balance + 1).to_string())
}

/// One replica: the deposit route, behind the lock layer if `manager` is given.
async fn replica(store: Store, manager: Option<LockManager>) -> Result<SocketAddr, Error> {
    let mut router = Router::new().route("/accounts/{id}/deposit", put(deposit));
    if let Some(manager) = manager {
        let locks = LockLayer::new(manager, key::pattern("/accounts/{id}"))
            .options(LockOptions::exclusive().wait_timeout(Duration::from_secs(10)));
        router = router.route_layer(locks);
    }
    // Added last, so it wraps the lock layer: the stamp is taken before the lock is awaited.
    let router = router
        .layer(MapRequestLayer::new(|mut req: Request<Body>| {
            req.extensions_mut().insert(Arrived(Instant::now()));
            req
        }))
        .with_state(store);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move { axum::serve(listener, router).await });
    Ok(addr)
}

/// Request `i`'s account: a fixed pseudo-random sequence, half hot accounts, half cold ones.
fn account(i: usize) -> u64 {
    let mut z = (i as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15); // splitmix64
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    if z & 1 == 0 {
        (z >> 1) % HOT_ACCOUNTS
    } else {
        HOT_ACCOUNTS + (z >> 1) % COLD_ACCOUNTS
    }
}

/// One deposit over HTTP: (latency seen by the client, lock wait reported by the replica).
async fn send(
    client: &HttpClient,
    addr: SocketAddr,
    id: u64,
) -> Result<(Duration, Duration), Error> {
    let started = Instant::now();
    let req = Request::put(format!("http://{addr}/accounts/{id}/deposit")).body(Empty::new())?;
    let (head, body) = client.request(req).await?.into_parts();
    let body = body.collect().await?.to_bytes();
    let latency = started.elapsed();
    if head.status != StatusCode::OK {
        let body = String::from_utf8_lossy(&body);
        return Err(format!("deposit to account {id}: {} {body}", head.status).into());
    }
    let wait = head
        .headers
        .get(WAIT_HEADER)
        .and_then(|v| v.to_str().ok()?.parse().ok());
    Ok((
        latency,
        Duration::from_micros(wait.ok_or("no lock wait header")?),
    ))
}

struct Report {
    lost: u64,
    per_sec: f64,
    latency: [Duration; 2],
    wait: [Duration; 2],
}

/// Two fresh replicas over a fresh store, `REQUESTS` deposits; locked if `managers` is given.
async fn run(label: &str, managers: Option<&[LockManager; 2]>) -> Result<Report, Error> {
    let store = Store::default();
    let mut addrs = [SocketAddr::from(([127, 0, 0, 1], 0)); 2];
    for (r, addr) in addrs.iter_mut().enumerate() {
        *addr = replica(store.clone(), managers.map(|m| m[r].clone())).await?;
    }
    let client: HttpClient = Client::builder(TokioExecutor::new()).build_http();
    let (next, done) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let started = Instant::now();
    let bar = tokio::spawn(progress(label.to_owned(), done.clone(), started));
    let workers: Vec<_> = (0..IN_FLIGHT)
        .map(|_| {
            let (client, next, done) = (client.clone(), next.clone(), done.clone());
            tokio::spawn(async move {
                let mut samples = Vec::new();
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= REQUESTS {
                        return Ok::<_, Error>(samples);
                    }
                    samples.push(send(&client, addrs[i % 2], account(i)).await?);
                    done.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    let results = futures_util::future::join_all(workers).await;
    let elapsed = started.elapsed();
    bar.abort();
    draw(label, done.load(Ordering::Relaxed), elapsed);
    eprintln!();
    let (mut latencies, mut waits) = (Vec::new(), Vec::new());
    for result in results {
        for (latency, wait) in result?? {
            latencies.push(latency);
            waits.push(wait);
        }
    }
    latencies.sort();
    waits.sort();
    let pct =
        |sorted: &[Duration], p: usize| sorted[(sorted.len() * p / 100).min(sorted.len() - 1)];
    Ok(Report {
        lost: REQUESTS as u64 - store.total(),
        per_sec: REQUESTS as f64 / elapsed.as_secs_f64(),
        latency: [pct(&latencies, 50), pct(&latencies, 99)],
        wait: [pct(&waits, 50), pct(&waits, 99)],
    })
}

/// Redraws the progress bar on stderr every 100 ms, if stderr is a terminal.
async fn progress(label: String, done: Arc<AtomicUsize>, started: Instant) {
    while std::io::stderr().is_terminal() {
        draw(&label, done.load(Ordering::Relaxed), started.elapsed());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn draw(label: &str, done: usize, elapsed: Duration) {
    const WIDTH: usize = 40;
    let filled = done * WIDTH / REQUESTS;
    let bar = format!("{}{}", "#".repeat(filled), " ".repeat(WIDTH - filled));
    let secs = elapsed.as_secs_f64();
    eprint!("\r{label:<13} [{bar}] {done:>5}/{REQUESTS} {secs:5.1} s");
}

#[cfg(feature = "redis")]
async fn redis(url: &str) -> Result<LockManager, Error> {
    let manager = LockManager::redis(url).await;
    manager.map_err(|err| format!("cannot use Redis at {url}: {err}").into())
}

#[cfg(not(feature = "redis"))]
async fn redis(_url: &str) -> Result<LockManager, Error> {
    Err("REDIS_URL is set but this build has no `redis` feature".into())
}

async fn demo() -> Result<bool, Error> {
    let started = Instant::now();
    let managers = match std::env::var("REDIS_URL") {
        Ok(url) => {
            println!("backend: Redis at {url}, one lock manager per replica");
            [redis(&url).await?, redis(&url).await?]
        }
        Err(_) => {
            println!("backend: in memory, one lock manager shared by both replicas (set REDIS_URL to use Redis)");
            let manager = LockManager::memory();
            [manager.clone(), manager]
        }
    };
    println!(
        "{REQUESTS} concurrent deposits ({IN_FLIGHT} in flight) to 2 replicas over HTTP: half to \
         {HOT_ACCOUNTS} hot accounts, half to {COLD_ACCOUNTS} cold ones\n"
    );
    let without = run("without lock", None).await?;
    let with = run("with lock", Some(&managers)).await?;
    println!(
        "\n{:<13} {:>12} {:>11} {:>12} {:>12} {:>14} {:>14}",
        "",
        "lost updates",
        "requests/s",
        "latency p50",
        "latency p99",
        "lock wait p50",
        "lock wait p99"
    );
    for (name, r) in [("without lock", &without), ("with lock", &with)] {
        println!(
            "{name:<13} {:>12} {:>11.0} {:>12.1?} {:>12.1?} {:>14.1?} {:>14.1?}",
            r.lost, r.per_sec, r.latency[0], r.latency[1], r.wait[0], r.wait[1]
        );
    }
    let secs = started.elapsed().as_secs_f64();
    if with.lost > 0 {
        println!(
            "\nFAILED: {} updates lost under the lock ({secs:.1} s)",
            with.lost
        );
        return Ok(false);
    }
    println!(
        "\nno update lost under the lock; {} lost without it ({secs:.1} s)",
        without.lost
    );
    Ok(true)
}

#[tokio::main]
async fn main() {
    match demo().await {
        Ok(true) => {}
        Ok(false) => std::process::exit(1),
        Err(err) => {
            eprintln!("\ndemo failed: {err}");
            std::process::exit(2);
        }
    }
}
