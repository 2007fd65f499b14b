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

    oldest_waits_show_per_mode(&m, &server, &exporter).await;

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
        ("tower_lock_oldest_wait_seconds", "gauge"),
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

/// The oldest wait of each mode: an exclusive request waiting in its process's cohort (behind a
/// hold of its own manager) and a fair one waiting in the lock's queue (behind another manager)
/// show ages of at least the 300 ms they waited, and never more than the truth; once they hold,
/// both modes fall back to 0.
async fn oldest_waits_show_per_mode(
    m: &LockManager,
    server: &RedisServer,
    exporter: &metrics_exporter_prometheus::PrometheusHandle,
) {
    let gauge = |mode: &str| -> Option<f64> {
        let prefix = format!("tower_lock_oldest_wait_seconds{{mode=\"{mode}\"}} ");
        let text = exporter.render();
        text.lines()
            .find_map(|line| line.strip_prefix(prefix.as_str())?.parse().ok())
    };
    let other = LockManager::redis(&server.url()).await.expect("manager");
    let own = m.acquire("e", &LockOptions::exclusive()).await.unwrap();
    let theirs = other.acquire("f", &LockOptions::fair()).await.unwrap();
    let began = std::time::Instant::now();
    let waits = {
        let m = m.clone();
        tokio::spawn(async move {
            let (exclusive, fair) = (LockOptions::exclusive(), LockOptions::fair());
            let (exclusive, fair) = tokio::join!(m.acquire("e", &exclusive), m.acquire("f", &fair));
            (exclusive.unwrap(), fair.unwrap())
        })
    };
    for mode in ["exclusive", "fair"] {
        let waited = || gauge(mode).is_some_and(|age| age >= 0.3);
        assert!(
            eventually(Duration::from_secs(5), waited).await,
            "{}",
            exporter.render()
        );
        let age = gauge(mode).expect("shown");
        assert!(age <= began.elapsed().as_secs_f64(), "{mode}: {age} s");
    }
    assert!(!waits.is_finished(), "both still wait");
    own.release().await.unwrap();
    theirs.release().await.unwrap();
    let (exclusive, fair) = waits.await.expect("task");
    exclusive.release().await.unwrap();
    fair.release().await.unwrap();
    for mode in ["exclusive", "fair"] {
        let none = || gauge(mode) == Some(0.0);
        assert!(
            eventually(Duration::from_secs(5), none).await,
            "{}",
            exporter.render()
        );
    }
    assert_eq!(
        gauge("semaphore"),
        None,
        "a mode nobody waited in is absent"
    );
    other.shutdown().await.unwrap();
}
