//! What `inspect` tells of each hold and wait besides its owner: how long it has lasted, the
//! process that made it (`LockManagerBuilder::label`) and the request it serves, through the
//! direct API and the layer, on memory and on real servers.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::routing::post;
use axum::Router;
use http::{Request, StatusCode};
use tokio::sync::Semaphore;
use tower::ServiceExt;
use tower_lock::axum::params;
use tower_lock::{HolderState, LockLayer, LockManager, LockOptions, LockState};

use crate::on_both_backends;
use crate::support::fixture::Fixture;
use crate::support::GENEROUS;

on_both_backends!(
    holds_and_waits_show_their_age_process_and_request,
    a_layer_told_not_to_record_requests_names_none,
);

/// How far a reported age may be from the one the test measured.
const AGE_SLACK: Duration = Duration::from_millis(50);

/// The state of `key`, once `ready` holds for it (a waiter reaches the server after its call).
async fn state_when(m: &LockManager, key: &str, ready: impl Fn(&LockState) -> bool) -> LockState {
    let deadline = Instant::now() + GENEROUS;
    loop {
        let state = m.inspect(key).await.expect("inspect");
        if ready(&state) || Instant::now() > deadline {
            return state;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// `m`'s state of `key`, and the time since each of `since` before and after it was read.
async fn timed<const N: usize>(
    m: &LockManager,
    key: &str,
    since: [Instant; N],
) -> (LockState, [Duration; N], [Duration; N]) {
    let least = since.map(|at| at.elapsed());
    let state = m.inspect(key).await.expect("inspect");
    (state, least, since.map(|at| at.elapsed()))
}

fn assert_age(age: Option<Duration>, least: Duration, most: Duration, what: &str) {
    let age = age.unwrap_or_else(|| panic!("{what}: no age"));
    assert!(
        age + AGE_SLACK >= least && age <= most + AGE_SLACK,
        "{what}: {age:?} not within {AGE_SLACK:?} of {least:?}..{most:?}"
    );
}

/// A router whose `POST /accounts/{id}` holds `accounts/{id}` through `layer` until `release`
/// gives it a permit.
fn accounts(layer: LockLayer<tower_lock::axum::Params>, release: Arc<Semaphore>) -> Router {
    let handler = move || async move {
        let _permit = release.acquire().await;
        StatusCode::OK
    };
    Router::new()
        .route("/accounts/{id}", post(handler))
        .route_layer(layer)
}

fn post_account(id: u32) -> Request<axum::body::Body> {
    let uri = format!("/accounts/{id}?secret=1");
    Request::post(uri).body(axum::body::Body::empty()).unwrap()
}

fn holder(state: &LockState) -> &HolderState {
    assert_eq!(state.holders.len(), 1, "{state:?}");
    &state.holders[0]
}

async fn holds_and_waits_show_their_age_process_and_request(fx: Fixture) {
    let (a, b, c) = (
        fx.labelled("replica-a").await,
        fx.labelled("replica-b").await,
        fx.labelled("replica-c").await,
    );
    let label = |name: &str| (!fx.is_memory()).then(|| name.to_owned());
    let key = "accounts/7";
    let held_since = Instant::now();
    let job = a.owner().request("nightly report");
    let guard = job.acquire(key, &LockOptions::fair()).await.unwrap();
    // the hold began between these two moments, whatever the acquisition cost
    let acquired = Instant::now();
    tokio::time::sleep(Duration::from_millis(300)).await;

    let waited_since = Instant::now();
    let direct = tokio::spawn({
        let b = b.clone();
        async move { b.acquire(key, &LockOptions::fair()).await }
    });
    state_when(&a, key, |s| s.waiters.len() == 1).await;
    let b_queued = Instant::now();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let release = Arc::new(Semaphore::new(0));
    let app = accounts(LockLayer::new(c.clone(), params(["id"])), release.clone());
    let through_layer = tokio::spawn(app.oneshot(post_account(7)));
    state_when(&a, key, |s| s.waiters.len() == 2).await;

    let since = [acquired, held_since, b_queued, waited_since];
    let (state, least, most) = timed(&c, key, since).await;
    let hold = holder(&state);
    assert_age(hold.held_for, least[0], most[1], "the hold");
    assert_eq!(hold.request.as_deref(), Some("nightly report"), "{hold:?}");
    if fx.is_memory() {
        let pid = format!(":{}", std::process::id());
        assert!(
            hold.label.as_ref().is_some_and(|l| l.ends_with(&pid)),
            "{hold:?}"
        );
    } else {
        assert_eq!(hold.label, label("replica-a"), "{hold:?}");
        let labels: Vec<_> = state.waiters.iter().map(|w| w.label.clone()).collect();
        assert_eq!(
            labels,
            [label("replica-b"), label("replica-c")],
            "{state:?}"
        );
        let first_wait = most[3];
        assert_age(state.waiters[0].waited, least[2], first_wait, "b");
        let second = state.waiters[1].waited.expect("a queued wait is timed");
        assert!(
            second + Duration::from_millis(150) < first_wait,
            "{state:?}"
        );
    }

    guard.release().await.unwrap();
    let taken = direct.await.unwrap().unwrap();
    let state = state_when(&a, key, |s| s.holders.len() == 1).await;
    assert_eq!(
        holder(&state).request,
        None,
        "the direct API names no request"
    );
    assert!(holder(&state).held_for.is_some_and(|age| age < GENEROUS));
    taken.release().await.unwrap();
    let by_layer = |s: &LockState| s.holders.len() == 1 && s.waiters.is_empty();
    let state = state_when(&a, key, by_layer).await;
    let hold = holder(&state);
    if fx.is_memory() {
        // memory records nothing of a wait: a hold granted from its queue names no request
        assert_eq!(hold.request, None, "{hold:?}");
    } else {
        let route = Some("POST /accounts/{id}");
        assert_eq!(hold.request.as_deref(), route, "never the query: {hold:?}");
        assert_eq!(hold.label, label("replica-c"), "{hold:?}");
    }
    release.add_permits(1);
    let response = through_layer.await.unwrap().unwrap();
    assert_eq!(response.status(), StatusCode::OK);
}

async fn a_layer_told_not_to_record_requests_names_none(fx: Fixture) {
    let (m, inspector) = (fx.manager().await, fx.manager().await);
    let release = Arc::new(Semaphore::new(0));
    let layer = LockLayer::new(m, params(["id"])).record_requests(false);
    let call = tokio::spawn(accounts(layer, release.clone()).oneshot(post_account(8)));
    let state = state_when(&inspector, "accounts/8", |s| !s.holders.is_empty()).await;
    let hold = holder(&state);
    assert_eq!(hold.request, None, "{hold:?}");
    assert!(
        hold.label.is_some(),
        "the process is named all the same: {hold:?}"
    );
    release.add_permits(1);
    assert_eq!(call.await.unwrap().unwrap().status(), StatusCode::OK);
}
