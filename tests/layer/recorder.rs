//! The layer's metrics reach the `metrics` facade (feature `metrics`).

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::Full;
use metrics::{Counter, Gauge, Histogram, Key, KeyName, Metadata, Recorder, SharedString, Unit};
use tower::{ServiceBuilder, ServiceExt};
use tower_lock::{key, LockLayer, LockManager, LockOptions};

/// Every value recorded, by metric name and labels (`name{label=value}`).
#[derive(Default)]
struct Store {
    values: Mutex<HashMap<String, Vec<f64>>>,
}

struct Handle {
    store: Arc<Store>,
    key: String,
}

impl Handle {
    fn push(&self, value: f64) {
        let mut values = self.store.values.lock().unwrap_or_else(|p| p.into_inner());
        values.entry(self.key.clone()).or_default().push(value);
    }
}

impl metrics::CounterFn for Handle {
    fn increment(&self, value: u64) {
        self.push(value as f64);
    }
    fn absolute(&self, value: u64) {
        self.push(value as f64);
    }
}

impl metrics::GaugeFn for Handle {
    fn increment(&self, value: f64) {
        self.push(value);
    }
    fn decrement(&self, value: f64) {
        self.push(-value);
    }
    fn set(&self, value: f64) {
        self.push(value);
    }
}

impl metrics::HistogramFn for Handle {
    fn record(&self, value: f64) {
        self.push(value);
    }
}

struct TestRecorder(Arc<Store>);

impl TestRecorder {
    fn handle(&self, key: &Key) -> Arc<Handle> {
        let labels: Vec<String> = key
            .labels()
            .map(|l| format!("{}={}", l.key(), l.value()))
            .collect();
        let name = if labels.is_empty() {
            key.name().to_owned()
        } else {
            format!("{}{{{}}}", key.name(), labels.join(","))
        };
        Arc::new(Handle {
            store: self.0.clone(),
            key: name,
        })
    }
}

impl Recorder for TestRecorder {
    fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
        Counter::from_arc(self.handle(key))
    }
    fn register_gauge(&self, key: &Key, _: &Metadata<'_>) -> Gauge {
        Gauge::from_arc(self.handle(key))
    }
    fn register_histogram(&self, key: &Key, _: &Metadata<'_>) -> Histogram {
        Histogram::from_arc(self.handle(key))
    }
}

#[test]
fn waits_holds_rejections_and_waiters_are_recorded() {
    let store = Arc::new(Store::default());
    let recorder = TestRecorder(store.clone());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    // the recorder is local to this thread, where the current-thread runtime runs every task
    metrics::with_local_recorder(&recorder, || {
        runtime.block_on(async {
            let manager = LockManager::memory();
            let service = ServiceBuilder::new()
                .layer(LockLayer::new(manager.clone(), key::path()).no_wait())
                .service_fn(|_req: Request<Full<Bytes>>| async {
                    Ok::<_, Infallible>(Response::new(Full::new(Bytes::new())))
                });
            let req = || {
                Request::put("/a")
                    .body(Full::new(Bytes::new()))
                    .expect("request")
            };

            let ok = service.clone().oneshot(req()).await.expect("infallible");
            assert_eq!(ok.status(), StatusCode::OK);
            let _held = manager
                .acquire(
                    "/a",
                    &LockOptions::exclusive().wait_timeout(Duration::from_secs(1)),
                )
                .await
                .expect("hold");
            let busy = service.clone().oneshot(req()).await.expect("infallible");
            assert_eq!(busy.status(), StatusCode::CONFLICT);

            // a handler that outlives its fixed lease (and is let run) counts as a lease loss
            let slow = ServiceBuilder::new()
                .layer(
                    LockLayer::new(manager.clone(), key::path()).lease(Duration::from_millis(20)),
                )
                .service_fn(|_req: Request<Full<Bytes>>| async {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    Ok::<_, Infallible>(Response::new(Full::new(Bytes::new())))
                });
            let req = Request::put("/slow")
                .body(Full::new(Bytes::new()))
                .expect("request");
            let late = slow.oneshot(req).await.expect("infallible");
            assert_eq!(late.status(), StatusCode::OK);
        })
    });

    let values = store.values.lock().unwrap_or_else(|p| p.into_inner());
    let get = |name: &str| values.get(name).cloned().unwrap_or_default();
    // every acquisition, by the manager: the two requests that got the lock and the busy one (the
    // layer's default mode, fair), and the direct acquire (exclusive)
    let waits = |outcome: &str, mode: &str| {
        get(&format!(
            "tower_lock_wait_seconds{{outcome={outcome},mode={mode}}}"
        ))
    };
    assert_eq!(waits("acquired", "fair").len(), 2, "{values:?}");
    assert_eq!(waits("acquired", "exclusive").len(), 1, "{values:?}");
    assert_eq!(waits("busy", "fair").len(), 1, "{values:?}");
    let holds = get("tower_lock_hold_seconds");
    assert_eq!(holds.len(), 2, "{values:?}");
    assert!(
        holds[1] >= 0.1,
        "the slow handler held its lock 100 ms: {holds:?}"
    );
    assert_eq!(
        get("tower_lock_rejections_total{reason=busy}"),
        [1.0],
        "{values:?}"
    );
    let waiters = get("tower_lock_waiters");
    assert_eq!(
        waiters.len(),
        6,
        "three acquisitions, in and out: {waiters:?}"
    );
    assert_eq!(waiters.iter().sum::<f64>(), 0.0, "nobody waits any more");
    assert_eq!(
        get("tower_lock_request_leases_lost_total"),
        [1.0],
        "{values:?}"
    );
}

#[test]
fn requests_that_pass_without_a_lock_are_counted() {
    let store = Arc::new(Store::default());
    let recorder = TestRecorder(store.clone());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    metrics::with_local_recorder(&recorder, || {
        runtime.block_on(async {
            let service = ServiceBuilder::new()
                .layer(LockLayer::new(
                    LockManager::memory(),
                    key::pattern("/accounts/{id}").optional(),
                ))
                .service_fn(|_req: Request<Full<Bytes>>| async {
                    Ok::<_, Infallible>(Response::new(Full::new(Bytes::new())))
                });
            for path in ["/accounts/1", "/health", "/accounts/2/orders"] {
                let req = Request::put(path)
                    .body(Full::new(Bytes::new()))
                    .expect("request");
                let reply = service.clone().oneshot(req).await.expect("infallible");
                assert_eq!(reply.status(), StatusCode::OK);
            }
        })
    });

    let values = store.values.lock().unwrap_or_else(|p| p.into_inner());
    assert_eq!(
        values.get("tower_lock_unlocked_total").cloned(),
        Some(vec![1.0]),
        "only /health passed unlocked: {values:?}"
    );
    assert_eq!(
        values.get("tower_lock_unmatched_total").cloned(),
        Some(vec![1.0]),
        "/health was not matched by the optional pattern: {values:?}"
    );
    assert_eq!(values.get("tower_lock_hold_seconds").map(Vec::len), Some(2));
}
