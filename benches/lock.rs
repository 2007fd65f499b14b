//! Criterion benches of the uncontended path: Redis PING (the baseline every figure is divided by),
//! acquire + release on Redis, and acquire + release in memory.
//!
//! ```text
//! cargo bench --bench lock            # starts its own redis-server
//! ```

#[path = "../tests/support/mod.rs"]
mod support;

use criterion::{criterion_group, criterion_main, Criterion};
use tower_lock::{LockManager, LockOptions};

fn uncontended(c: &mut Criterion) {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let server = support::RedisServer::start();
    let (mut conn, redis, memory) = rt.block_on(async {
        let client = redis::Client::open(server.url()).expect("client");
        let conn = client
            .get_multiplexed_async_connection()
            .await
            .expect("connection");
        let redis = LockManager::redis(&server.url()).await.expect("manager");
        (conn, redis, LockManager::memory())
    });
    let opts = LockOptions::exclusive();

    let mut group = c.benchmark_group("uncontended");
    group.bench_function("redis PING round trip", |b| {
        b.to_async(&rt).iter(|| {
            let mut conn = conn.clone();
            async move {
                let _: String = redis::cmd("PING")
                    .query_async(&mut conn)
                    .await
                    .expect("PING");
            }
        })
    });
    group.bench_function("redis acquire+release", |b| {
        b.to_async(&rt).iter(|| async {
            let guard = redis.acquire("bench", &opts).await.expect("acquire");
            guard.release().await.expect("release");
        })
    });
    group.bench_function("memory acquire+release", |b| {
        b.to_async(&rt).iter(|| async {
            let guard = memory.acquire("bench", &opts).await.expect("acquire");
            guard.release().await.expect("release");
        })
    });
    group.finish();
    let _: redis::RedisResult<String> = rt.block_on(redis::cmd("PING").query_async(&mut conn));
}

criterion_group!(benches, uncontended);
criterion_main!(benches);
