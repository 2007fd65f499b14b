//! Fail-closed keys on the tower layer: a request a built-in extractor does not match is answered
//! 400 (gRPC `INVALID_ARGUMENT`) with the reason, never run unlocked; `.optional()` lets it
//! through, counted and warned about once a minute per route; a pattern that cannot be meant is
//! refused when it is built; and a job that locks `Pattern::name_with` excludes the layer.

use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use http::{Request, Response, StatusCode};
use http_body_util::BodyExt;
use tower::{ServiceBuilder, ServiceExt};
use tower_lock::key::{self, KeyExtractor};
use tower_lock::{LockLayer, LockManager, LockOptions};

use crate::support::logs::{self, Warnings};
use crate::support::{RedisServer, GENEROUS};

/// Send `req` through `layer` in front of a handler that counts its calls; the status, the body
/// (or gRPC status and message) and the number of handler calls.
async fn through<K: KeyExtractor>(
    layer: &LockLayer<K>,
    req: Request<String>,
) -> (StatusCode, String, usize) {
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = calls.clone();
    let service =
        ServiceBuilder::new()
            .layer(layer.clone())
            .service_fn(move |_req: Request<String>| {
                counted.fetch_add(1, Ordering::SeqCst);
                async { Ok::<_, Infallible>(Response::new(String::from("ran"))) }
            });
    let response = service.oneshot(req).await.expect("infallible");
    let status = response.status();
    let grpc = response
        .headers()
        .get("grpc-status")
        .map(|code| format!("grpc-status {code:?}: "));
    let message = response.headers().get("grpc-message").cloned();
    let body = response
        .into_body()
        .collect()
        .await
        .expect("body")
        .to_bytes();
    let text = match (grpc, message) {
        (Some(code), Some(message)) => code + &String::from_utf8_lossy(message.as_bytes()),
        _ => String::from_utf8_lossy(&body).into_owned(),
    };
    (status, text, calls.load(Ordering::SeqCst))
}

fn put(path: &str) -> Request<String> {
    Request::put(path).body(String::new()).expect("request")
}

#[tokio::test]
async fn every_built_in_extractor_rejects_what_it_does_not_match() {
    let manager = LockManager::memory();
    let pattern = LockLayer::new(manager.clone(), key::pattern("/accounts/{id}"));
    let (status, body, calls) = through(&pattern, put("/api/accounts/1")).await;
    assert_eq!((status, calls), (StatusCode::BAD_REQUEST, 0), "{body}");
    assert_eq!(
        body,
        "cannot derive a lock key from the request: path /api/accounts/1 does not match the lock \
         pattern /accounts/{id}\n"
    );

    let header = LockLayer::new(manager.clone(), key::header("x-account"));
    let (status, body, calls) = through(&header, put("/accounts/1")).await;
    assert_eq!((status, calls), (StatusCode::BAD_REQUEST, 0), "{body}");
    assert!(body.contains("header x-account is missing"), "{body}");

    // combined, prefixed and filtered extractors keep the rejection
    let combined = LockLayer::new(
        manager.clone(),
        key::path()
            .and(key::pattern("/accounts/{id}").prefix("a:"))
            .only_methods(["PUT"]),
    );
    let (status, body, calls) = through(&combined, put("/health")).await;
    assert_eq!((status, calls), (StatusCode::BAD_REQUEST, 0), "{body}");
    let get = Request::get("/health")
        .body(String::new())
        .expect("request");
    let (status, _, calls) = through(&combined, get).await;
    assert_eq!(
        (status, calls),
        (StatusCode::OK, 1),
        "a method left out locks nothing, on purpose"
    );

    // from_fn returning None is the one explicit "no lock"
    let none = LockLayer::new(
        manager.clone(),
        key::from_fn(|_: &dyn key::RequestView| None::<String>),
    );
    let (status, _, calls) = through(&none, put("/anything")).await;
    assert_eq!((status, calls), (StatusCode::OK, 1));
    assert_eq!(
        none.unlocked_counter().get(),
        0,
        "not an unmatched extractor"
    );
}

#[tokio::test]
async fn grpc_requests_get_invalid_argument_with_the_reason() {
    let manager = LockManager::memory();
    let layer = LockLayer::new(manager, key::header("x-account").prefix("accounts/"));
    let mut req = put("/bank.Bank/Deposit");
    req.headers_mut()
        .insert("content-type", "application/grpc".parse().expect("value"));
    let (status, text, calls) = through(&layer, req).await;
    assert_eq!((status, calls), (StatusCode::OK, 0), "trailers-only");
    assert!(text.starts_with("grpc-status \"3\": "), "{text}");
    assert!(text.contains("x-account"), "{text}");
}

#[tokio::test]
async fn optional_extractors_pass_counted_and_warn_once_a_minute_per_route() {
    let (warnings, lines) = Warnings::new();
    let _logs = logs::set_thread_default(warnings);
    let manager = LockManager::memory();
    let layer = LockLayer::new(
        manager.clone(),
        key::pattern("/accounts/{id}")
            .optional()
            .and(key::header("x-tenant").optional().prefix("tenant:")),
    );
    let counter = layer.unlocked_counter();
    for _ in 0..20 {
        for path in ["/health", "/metrics"] {
            let (status, _, calls) = through(&layer, put(path)).await;
            assert_eq!((status, calls), (StatusCode::OK, 1));
        }
    }
    // an account path without the tenant header: locked by the pattern, and still counted
    let (status, _, _) = through(&layer, put("/accounts/1")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(counter.get(), 41);
    assert_eq!(
        layer.clone().unlocked_counter().get(),
        41,
        "clones count together"
    );
    assert_eq!(manager.held(), 0);

    let lines = lines.lock().expect("lines").clone();
    assert_eq!(lines.len(), 3, "one per route: {lines:#?}");
    for (line, path) in lines.iter().zip(["/health", "/metrics", "/accounts/1"]) {
        assert!(line.contains(&format!("path={path} ")), "{line}");
    }
    assert!(
        lines[0].contains("extractor=pattern /accounts/{id}"),
        "{}",
        lines[0]
    );
    assert!(
        lines[2].contains("extractor=header x-tenant"),
        "{}",
        lines[2]
    );
    assert!(lines[2].contains("some locks"), "{}", lines[2]);
}

#[test]
#[should_panic(expected = "invalid lock pattern \"/accounts/:id\": \":id\" is the old axum syntax")]
fn a_pattern_in_the_old_axum_syntax_is_refused_when_the_layer_is_built() {
    let _ = LockLayer::new(LockManager::memory(), key::pattern("/accounts/:id"));
}

#[test]
fn patterns_that_cannot_be_meant_are_refused_with_their_name() {
    for (pattern, says) in [
        ("/accounts/{id", "unbalanced braces"),
        ("", "empty"),
        ("/orgs/{id}/accounts/{id}", "named twice"),
    ] {
        let err = key::try_pattern(pattern).expect_err(pattern);
        assert!(matches!(err, tower_lock::KeyError::Pattern { .. }));
        let text = err.to_string();
        assert!(
            text.contains(&format!("{pattern:?}")) && text.contains(says),
            "{text}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_locking_the_helpers_name_excludes_the_layers_request() {
    let server = RedisServer::start();
    let replica = LockManager::redis(&server.url()).await.expect("replica");
    let job = LockManager::redis(&server.url()).await.expect("job");
    let accounts = key::pattern("/accounts/{id}");
    let layer = LockLayer::new(replica.clone(), accounts.clone())
        .options(LockOptions::exclusive())
        .wait_timeout(Duration::from_millis(200));

    // ids that need escaping: what `format!("accounts/{id}")` gets wrong
    for (id, path) in [
        ("a/b", "/accounts/a%2Fb/deposit"),
        ("caf\u{e9} 100%", "/accounts/caf%C3%A9%20100%25"),
        ("42", "/accounts/4%32"),
    ] {
        let name = accounts.name_with(&[("id", id)]).expect("name");
        let held = job
            .acquire(&name, &LockOptions::exclusive())
            .await
            .expect("job holds");
        let (status, body, calls) = through(&layer, put(path)).await;
        assert_eq!(
            (status, calls),
            (StatusCode::SERVICE_UNAVAILABLE, 0),
            "{path} waited for the job's {name} and timed out: {body}"
        );
        held.release().await.expect("release");
        let (status, _, calls) = tokio::time::timeout(GENEROUS, through(&layer, put(path)))
            .await
            .expect("in time");
        assert_eq!((status, calls), (StatusCode::OK, 1), "{path}");
    }
}
