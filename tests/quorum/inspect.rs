//! `inspect`, `list` and `force_release` on a quorum of three masters: a hold shows where a
//! majority keeps it, with its process, request and age; a forced release passes the lock on.

use std::time::{Duration, Instant};

use tower_lock::{LockFamily, LockManager, LockOptions, Mode};

use crate::support::masters::{Masters, NODE_TIMEOUT};
use crate::support::GENEROUS;

const LEASE: Duration = Duration::from_secs(3);

async fn labelled(masters: &Masters, label: &str) -> LockManager {
    LockManager::builder()
        .quorum(masters.urls())
        .lease(LEASE)
        .node_timeout(NODE_TIMEOUT)
        .label(label)
        .build()
        .await
        .expect("quorum manager")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quorum_shows_its_holder_and_waiter_and_forces_the_lock_on() {
    let masters = Masters::start(3);
    let (a, b) = (
        labelled(&masters, "q-a").await,
        labelled(&masters, "q-b").await,
    );
    let since = Instant::now();
    let job = a.owner().request("ledger close");
    let held = job
        .acquire("qi:1", &LockOptions::exclusive())
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let waiting = tokio::spawn({
        let b = b.clone();
        async move { b.acquire("qi:1", &LockOptions::exclusive()).await }
    });
    let deadline = Instant::now() + GENEROUS;
    let state = loop {
        let state = b.inspect("qi:1").await.unwrap();
        if !state.waiters.is_empty() || Instant::now() > deadline {
            break state;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    let (least, most) = (Duration::from_millis(200), since.elapsed());
    assert_eq!(state.family, Some(LockFamily::Exclusive), "{state:?}");
    assert_eq!(state.holders.len(), 1, "{state:?}");
    let holder = &state.holders[0];
    assert_eq!(
        (holder.manager.as_str(), holder.mode),
        (a.id(), Mode::Exclusive)
    );
    assert_eq!(holder.label.as_deref(), Some("q-a"), "{holder:?}");
    assert_eq!(
        holder.request.as_deref(),
        Some("ledger close"),
        "{holder:?}"
    );
    assert!(holder.token >= Some(held.fencing_token()), "{holder:?}");
    let age = holder.held_for.expect("a quorum hold is timed");
    let slack = Duration::from_millis(50);
    assert!(age + slack >= least && age <= most + slack, "{age:?}");
    assert!(
        holder.lease_left.is_some_and(|l| l <= LEASE * 11 / 10),
        "{holder:?}"
    );
    assert_eq!(state.waiters.len(), 1, "{state:?}");
    assert_eq!(state.waiters[0].manager, b.id());

    let listed = b.list("qi:").await.unwrap();
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0].key, "qi:1");
    assert_eq!(listed[0].holders[0].owner, holder.owner);

    let forced_at = Instant::now();
    assert!(b.force_release("qi:1").await.unwrap(), "a hold was ended");
    let taken = tokio::time::timeout(GENEROUS, waiting)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(taken.fencing_token() > held.fencing_token());
    tokio::time::timeout(LEASE / 3 + Duration::from_millis(500), held.lost())
        .await
        .expect("the old holder learns it lost the lock at its next renewal");
    let told = forced_at.elapsed();
    assert!(told <= LEASE / 3 + Duration::from_millis(100), "{told:?}");
    let state = a.inspect("qi:1").await.unwrap();
    assert_eq!(state.holders.len(), 1, "{state:?}");
    assert_eq!(state.holders[0].label.as_deref(), Some("q-b"));
    taken.release().await.unwrap();
    assert!(a.inspect("qi:1").await.unwrap().is_idle());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_layer_request_holding_a_quorum_lock_shows_its_method_and_path() {
    use std::convert::Infallible;
    use std::sync::Arc;

    use http::{Request, Response};
    use tower::{ServiceBuilder, ServiceExt};
    use tower_lock::{key, LockLayer};

    let masters = Masters::start(3);
    let (replica, operator) = (
        labelled(&masters, "q-web").await,
        labelled(&masters, "q-op").await,
    );
    let release = Arc::new(tokio::sync::Semaphore::new(0));
    let service = ServiceBuilder::new()
        .layer(LockLayer::new(replica, key::path()))
        .service_fn({
            let release = release.clone();
            move |_req: Request<String>| {
                let release = release.clone();
                async move {
                    let _permit = release.acquire().await;
                    Ok::<_, Infallible>(Response::new(String::new()))
                }
            }
        });
    let req = Request::put("/accounts/9?secret=1")
        .body(String::new())
        .unwrap();
    let call = tokio::spawn(service.oneshot(req));
    let deadline = Instant::now() + GENEROUS;
    let state = loop {
        let state = operator.inspect("/accounts/9").await.unwrap();
        if !state.holders.is_empty() || Instant::now() > deadline {
            break state;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    assert_eq!(state.holders.len(), 1, "{state:?}");
    let holder = &state.holders[0];
    // no router named a route: the path, never the query
    assert_eq!(
        holder.request.as_deref(),
        Some("PUT /accounts/9"),
        "{holder:?}"
    );
    assert_eq!(holder.label.as_deref(), Some("q-web"), "{holder:?}");
    release.add_permits(1);
    assert!(call.await.unwrap().unwrap().status().is_success());
}
