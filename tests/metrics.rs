//! The metrics as an operator scrapes them: a real Prometheus exporter, installed as the global
//! recorder before any manager or layer is built, renders each metric of the crate with its HELP
//! text, its type and its labels, after a run against a real redis-server that moves each one.

#[path = "support/mod.rs"]
mod support;

use std::convert::Infallible;
use std::time::Duration;

use http::{Request, Response, StatusCode};
use metrics_exporter_prometheus::PrometheusBuilder;
use tower::{ServiceBuilder, ServiceExt};
use tower_lock::{key, LockLayer, LockManager, LockOptions};

use support::logs::Warnings;
use support::{eventually, RedisServer};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_metric_is_described_typed_and_labelled() {
    let recorder = PrometheusBuilder::new()
        .set_buckets(&[0.001, 0.01, 0.1, 1.0])
        .expect("buckets")
        .build_recorder();
    let exporter = recorder.handle();
    metrics::set_global_recorder(recorder).expect("the only recorder of this test binary");
    let (subscriber, warnings) = Warnings::new();
    tracing::subscriber::set_global_default(subscriber).expect("one subscriber");

    let mut server = RedisServer::start();
    let m = LockManager::builder()
        .redis(server.url())
        .lease(Duration::from_millis(600))
        .build()
        .await
        .expect("manager");
    let held = m.acquire("a", &LockOptions::exclusive()).await.unwrap();
    assert!(m
        .try_acquire("a", &LockOptions::exclusive())
        .await
        .unwrap()
        .is_none());
    let short = LockOptions::exclusive().wait_timeout(Duration::from_millis(50));
    assert!(m.acquire("a", &short).await.is_err());
    let forever = LockOptions::exclusive();
    let waiting = m.acquire("a", &forever);
    assert!(tokio::time::timeout(Duration::from_millis(50), waiting)
        .await
        .is_err());

    // the layer: a request that holds the lock, and one rejected while the lock is held
    let service = ServiceBuilder::new()
        .layer(LockLayer::new(m.clone(), key::path()).no_wait())
        .service_fn(|_req: Request<String>| async {
            Ok::<_, Infallible>(Response::new(String::new()))
        });
    let put = |path: &str| Request::put(path).body(String::new()).unwrap();
    let ok = service.clone().oneshot(put("/b")).await.unwrap();
    assert_eq!(ok.status(), StatusCode::OK);
    let other = m.acquire("/b", &LockOptions::exclusive()).await.unwrap();
    let busy = service.clone().oneshot(put("/b")).await.unwrap();
    assert_eq!(busy.status(), StatusCode::CONFLICT);
    other.release().await.unwrap();
    let routes = ServiceBuilder::new()
        .layer(LockLayer::new(
            m.clone(),
            key::pattern("/accounts/{id}").optional(),
        ))
        .service_fn(|_req: Request<String>| async {
            Ok::<_, Infallible>(Response::new(String::new()))
        });
    let unmatched = routes.oneshot(put("/health")).await.unwrap();
    assert_eq!(unmatched.status(), StatusCode::OK);

    // renewals go on; then the lock is deleted behind its holder, and the inbox is cut
    let scraped = || exporter.render();
    let renewed = || scraped().contains("tower_lock_renewals_total{result=\"renewed\"}");
    assert!(
        eventually(Duration::from_secs(5), renewed).await,
        "{}",
        scraped()
    );
    server.cmd(&["DEL", "{tower-lock:a}"]);
    assert!(eventually(Duration::from_secs(5), || held.is_lost()).await);
    // the warning names the lock as it was given
    let named = warnings
        .lock()
        .unwrap()
        .iter()
        .any(|w| w.contains("lost") && w.contains("key=a"));
    assert!(named, "{:?}", warnings.lock().unwrap());
    server.client_kill_pubsub();
    let reconnected = || scraped().contains("tower_lock_inbox_reconnects_total 1");
    assert!(
        eventually(Duration::from_secs(10), reconnected).await,
        "{}",
        scraped()
    );
    drop(held);
    server.kill();
    let down = m.try_acquire("c", &LockOptions::exclusive()).await;
    assert!(down.is_err_and(|err| err.is_unavailable()));

    let text = scraped();
    let has = |line: &str| assert!(text.lines().any(|l| l == line), "no `{line}` in\n{text}");
    let starts = |start: &str| {
        assert!(
            text.lines().any(|l| l.starts_with(start)),
            "no `{start}…` in\n{text}"
        );
    };
    for (name, kind) in [
        ("tower_lock_wait_seconds", "histogram"),
        ("tower_lock_holds", "gauge"),
        ("tower_lock_leases_lost_total", "counter"),
        ("tower_lock_renewals_total", "counter"),
        ("tower_lock_inbox_reconnects_total", "counter"),
        ("tower_lock_redis_call_seconds", "histogram"),
        ("tower_lock_hold_seconds", "histogram"),
        ("tower_lock_rejections_total", "counter"),
        ("tower_lock_waiters", "gauge"),
        ("tower_lock_unlocked_total", "counter"),
        ("tower_lock_unmatched_total", "counter"),
    ] {
        has(&format!("# TYPE {name} {kind}"));
        starts(&format!("# HELP {name} "));
    }
    for outcome in ["acquired", "busy", "timeout", "cancelled", "unavailable"] {
        starts(&format!(
            "tower_lock_wait_seconds_count{{outcome=\"{outcome}\",mode=\"exclusive\"}}"
        ));
    }
    starts("tower_lock_leases_lost_total{cause=\"gone\"} 1");
    starts("tower_lock_redis_call_seconds_count{result=\"ok\"}");
    starts("tower_lock_redis_call_seconds_count{result=\"error\"}");
    starts("tower_lock_rejections_total{reason=\"busy\"} 1");
    has("tower_lock_unlocked_total 1");
    has("tower_lock_unmatched_total 1");
    has("tower_lock_holds 0");
    has("tower_lock_waiters 0");
}
