//! Each acquisition gets a `tracing` span named `lock` with the lock's key, mode, outcome, wait
//! and token, opened as a child of the request's span (a `TraceLayer`'s, say).

use std::cell::RefCell;
use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use http::{Request, Response, StatusCode};
use tower::{ServiceBuilder, ServiceExt};
use tower_lock::{key, LockLayer, LockManager};
use tracing::Instrument;

use crate::support::logs::{self, Fields};

#[tokio::test]
async fn an_acquisition_span_is_a_child_of_the_request_span() {
    let spans = Arc::new(Spans::default());
    let _default = logs::set_thread_default(Recorder(spans.clone()));
    let service = ServiceBuilder::new()
        .layer(LockLayer::new(LockManager::memory(), key::path()))
        .service_fn(|_req: Request<String>| async {
            Ok::<_, Infallible>(Response::new(String::new()))
        });
    let req = Request::put("/accounts/7").body(String::new()).unwrap();
    let request_span = tracing::info_span!("request");
    let response = service.oneshot(req).instrument(request_span).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);

    let table = spans.table.lock().unwrap();
    let (request, _) = table
        .iter()
        .find(|(_, s)| s.name == "request")
        .expect("request span");
    let (_, lock) = table
        .iter()
        .find(|(_, s)| s.name == "lock")
        .expect("lock span");
    assert_eq!(lock.parent, Some(*request), "{table:?}");
    for field in [
        "key=/accounts/7",
        "mode=fair",
        "outcome=acquired",
        "token=",
        "waited_ms=",
    ] {
        assert!(lock.fields.contains(field), "no {field} in {}", lock.fields);
    }
}

#[derive(Debug)]
struct SpanRecord {
    name: &'static str,
    parent: Option<u64>,
    fields: String,
}

#[derive(Default)]
struct Spans {
    next: AtomicU64,
    table: Mutex<HashMap<u64, SpanRecord>>,
}

/// Records every span, its parent (the span entered when it was made) and its fields.
struct Recorder(Arc<Spans>);

thread_local! {
    static ENTERED: RefCell<Vec<u64>> = const { RefCell::new(Vec::new()) };
}

impl tracing::Subscriber for Recorder {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, attrs: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        let id = self.0.next.fetch_add(1, Ordering::Relaxed) + 1;
        let parent = match attrs.parent() {
            Some(parent) => Some(parent.into_u64()),
            None if attrs.is_contextual() => ENTERED.with(|e| e.borrow().last().copied()),
            None => None,
        };
        let mut fields = String::new();
        attrs.record(&mut Fields(&mut fields));
        let name = attrs.metadata().name();
        let record = SpanRecord {
            name,
            parent,
            fields,
        };
        self.0.table.lock().unwrap().insert(id, record);
        tracing::span::Id::from_u64(id)
    }
    fn record(&self, span: &tracing::span::Id, values: &tracing::span::Record<'_>) {
        if let Some(record) = self.0.table.lock().unwrap().get_mut(&span.into_u64()) {
            values.record(&mut Fields(&mut record.fields));
        }
    }
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, _: &tracing::Event<'_>) {}
    fn enter(&self, span: &tracing::span::Id) {
        ENTERED.with(|e| e.borrow_mut().push(span.into_u64()));
    }
    fn exit(&self, _: &tracing::span::Id) {
        ENTERED.with(|e| e.borrow_mut().pop());
    }
}
