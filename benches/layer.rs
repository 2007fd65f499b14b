//! The lock layer's overhead on an uncontended request.
//!
//! ```text
//! cargo bench --bench layer                  # starts its own redis-server for the Redis part
//! REDIS_URL=redis://127.0.0.1:6379 cargo bench --bench layer
//! ```
//!
//! - memory backend: `ServiceExt::oneshot` through `LockLayer` versus the same service without it;
//! - Redis backend: the same request through a layer on a Redis manager, beside the Redis PING
//!   round trip measured in the same run (the layer costs one acquire script call; the release is
//!   sent in the background after the response).
//!
//! Requests rotate over 1024 accounts so that each finds its lock free (no request waits for the
//! background release of the one before). After criterion's estimates, p50/p99 of interleaved
//! samples are printed, overhead included.

#[path = "../tests/support/mod.rs"]
mod support;

use std::convert::Infallible;
use std::time::{Duration, Instant};

use bytes::Bytes;
use criterion::{criterion_group, Criterion};
use http::{Request, Response};
use http_body_util::Full;
use tower::util::BoxCloneService;
use tower::{service_fn, ServiceBuilder, ServiceExt};
use tower_lock::{key, LockLayer, LockManager};

type Service = BoxCloneService<Request<Full<Bytes>>, Response<Full<Bytes>>, Infallible>;

const ACCOUNTS: usize = 1024;

fn handler() -> impl tower::Service<
    Request<Full<Bytes>>,
    Response = Response<Full<Bytes>>,
    Error = Infallible,
    Future = impl Send,
> + Clone
       + Send
       + 'static {
    service_fn(|_req: Request<Full<Bytes>>| async {
        Ok::<_, Infallible>(Response::new(Full::new(Bytes::from_static(b"ok"))))
    })
}

fn bare() -> Service {
    BoxCloneService::new(handler())
}

fn locked(manager: &LockManager) -> Service {
    let service = ServiceBuilder::new()
        .layer(LockLayer::new(
            manager.clone(),
            key::pattern("/accounts/{id}"),
        ))
        .service(handler())
        .map_response(|response: Response<_>| {
            response.map(|_| Full::new(Bytes::from_static(b"ok")))
        });
    BoxCloneService::new(service)
}

fn paths() -> Vec<String> {
    (0..ACCOUNTS).map(|i| format!("/accounts/{i}")).collect()
}

async fn one(service: &Service, path: &str) {
    let req = Request::put(path)
        .body(Full::new(Bytes::new()))
        .expect("request");
    let response = service.clone().oneshot(req).await.expect("infallible");
    assert_eq!(response.status(), 200);
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime")
}

fn memory(c: &mut Criterion) {
    let rt = runtime();
    let manager = LockManager::memory();
    let (bare, locked) = (bare(), locked(&manager));
    let paths = paths();
    let mut group = c.benchmark_group("layer/memory");
    let mut i = 0;
    group.bench_function("no layer", |b| {
        b.to_async(&rt).iter(|| {
            i = (i + 1) % ACCOUNTS;
            one(&bare, &paths[i])
        })
    });
    group.bench_function("LockLayer", |b| {
        b.to_async(&rt).iter(|| {
            i = (i + 1) % ACCOUNTS;
            one(&locked, &paths[i])
        })
    });
    group.finish();
}

struct RedisTarget {
    url: String,
    _server: Option<support::RedisServer>,
}

fn redis_target() -> RedisTarget {
    match std::env::var("REDIS_URL") {
        Ok(url) => RedisTarget { url, _server: None },
        Err(_) => {
            let server = support::RedisServer::start();
            RedisTarget {
                url: server.url(),
                _server: Some(server),
            }
        }
    }
}

async fn ping(conn: &mut redis::aio::MultiplexedConnection) {
    let pong: String = redis::cmd("PING").query_async(conn).await.expect("PING");
    assert_eq!(pong, "PONG");
}

fn redis_backend(c: &mut Criterion) {
    let target = redis_target();
    let rt = runtime();
    let (manager, conn) = rt.block_on(async {
        let manager = LockManager::redis(&target.url).await.expect("manager");
        let client = redis::Client::open(target.url.as_str()).expect("client");
        let conn = client
            .get_multiplexed_async_connection()
            .await
            .expect("connection");
        (manager, conn)
    });
    let locked = locked(&manager);
    let paths = paths();
    let mut group = c.benchmark_group("layer/redis");
    group.bench_function("PING", |b| {
        b.to_async(&rt).iter(|| {
            let mut conn = conn.clone();
            async move { ping(&mut conn).await }
        })
    });
    let mut i = 0;
    group.bench_function("LockLayer", |b| {
        b.to_async(&rt).iter(|| {
            i = (i + 1) % ACCOUNTS;
            one(&locked, &paths[i])
        })
    });
    group.finish();
}

/// p50 and p99 of `samples`, in microseconds.
fn percentiles(samples: &mut [Duration]) -> (f64, f64) {
    samples.sort_unstable();
    let at = |q: f64| samples[((samples.len() - 1) as f64 * q) as usize].as_secs_f64() * 1e6;
    (at(0.50), at(0.99))
}

/// Interleave the variants sample by sample, so that all see the machine in the same state.
fn summary() {
    const SAMPLES: usize = 20_000;
    const REDIS_SAMPLES: usize = 3_000;
    let rt = runtime();
    let paths = paths();
    let manager = LockManager::memory();
    let (bare, locked_memory) = (bare(), locked(&manager));
    let (mut no_layer, mut with_layer) = (Vec::new(), Vec::new());
    rt.block_on(async {
        for i in 0..SAMPLES + 1000 {
            let path = &paths[i % ACCOUNTS];
            let t = Instant::now();
            one(&bare, path).await;
            let bare_time = t.elapsed();
            let t = Instant::now();
            one(&locked_memory, path).await;
            let locked_time = t.elapsed();
            if i >= 1000 {
                no_layer.push(bare_time);
                with_layer.push(locked_time);
            }
        }
    });
    let (bare50, bare99) = percentiles(&mut no_layer);
    let (mem50, mem99) = percentiles(&mut with_layer);
    println!("summary, {SAMPLES} interleaved samples (µs):");
    println!("  no layer             p50 {bare50:8.2}  p99 {bare99:8.2}");
    println!(
        "  LockLayer (memory)   p50 {mem50:8.2}  p99 {mem99:8.2}  overhead p50 {:.2}",
        mem50 - bare50
    );

    let target = redis_target();
    let (mut pings, mut layered) = (Vec::new(), Vec::new());
    rt.block_on(async {
        let manager = LockManager::redis(&target.url).await.expect("manager");
        let locked_redis = locked(&manager);
        let client = redis::Client::open(target.url.as_str()).expect("client");
        let mut conn = client
            .get_multiplexed_async_connection()
            .await
            .expect("connection");
        for i in 0..REDIS_SAMPLES + 300 {
            let t = Instant::now();
            ping(&mut conn).await;
            let ping_time = t.elapsed();
            let t = Instant::now();
            one(&locked_redis, &paths[i % ACCOUNTS]).await;
            let layer_time = t.elapsed();
            if i >= 300 {
                pings.push(ping_time);
                layered.push(layer_time);
            }
        }
    });
    let (ping50, ping99) = percentiles(&mut pings);
    let (red50, red99) = percentiles(&mut layered);
    println!("  Redis PING           p50 {ping50:8.2}  p99 {ping99:8.2}");
    println!(
        "  LockLayer (Redis)    p50 {red50:8.2}  p99 {red99:8.2}  = {:.2} x PING p50",
        red50 / ping50
    );
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    targets = memory, redis_backend
}

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
    summary();
}
