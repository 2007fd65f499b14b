//! Exclusive and fair requests on one lock: the second mode is refused with `Unsupported`, naming
//! the key, while the lock is held (or queued for) in the first — never a silent barge past the
//! other mode's waiters.

use std::time::Duration;

use tower_lock::{LockError, LockManager, LockOptions};

use super::support;
use support::fixture::Fixture;

async fn refused(m: &LockManager, key: &str, opts: &LockOptions) {
    let waiting = opts.wait_timeout(Duration::from_secs(2));
    for outcome in [
        m.try_acquire(key, opts).await.map(|_| ()),
        m.acquire(key, &waiting).await.map(drop),
    ] {
        match outcome {
            Err(LockError::Unsupported { key: named, what }) => {
                assert_eq!(named, key);
                assert!(
                    what.contains("fair") && what.contains("exclusive"),
                    "{what}"
                );
            }
            other => panic!("{key}: a request of the other mode got {other:?}"),
        }
    }
}

async fn one_lock_takes_one_mode(fixture: Fixture) {
    let (m, other) = (fixture.manager().await, fixture.manager().await);
    let (fair, exclusive) = (LockOptions::fair(), LockOptions::exclusive());
    let fair_held = m.acquire("f", &fair).await.unwrap();
    refused(&other, "f", &exclusive).await;
    let exclusive_held = m.acquire("e", &exclusive).await.unwrap();
    refused(&other, "e", &fair).await;
    // free again, a lock takes either mode
    fair_held.release().await.unwrap();
    exclusive_held.release().await.unwrap();
    let now_exclusive = other.acquire("f", &exclusive).await.unwrap();
    let now_fair = other.acquire("e", &fair).await.unwrap();
    now_exclusive.release().await.unwrap();
    now_fair.release().await.unwrap();
}

crate::on_both_backends!(one_lock_takes_one_mode);

/// A lock free while an exclusive request waits for it (its holder's lease ran out, the waiter not
/// woken yet) refuses a fair request: the fair take would keep the waiting managers from ever
/// hearing a release (a fair release tells only fair waiters).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fair_request_does_not_take_a_lock_exclusive_requests_wait_for() {
    let server = support::RedisServer::start();
    let manager = || async { LockManager::redis(&server.url()).await.unwrap() };
    let (holder, waiting, fair) = (manager().await, manager().await, manager().await);
    let held = holder
        .acquire("k", &LockOptions::exclusive())
        .await
        .unwrap();
    let waiter = tokio::spawn({
        let waiting = waiting.clone();
        async move {
            waiting
                .acquire("k", &LockOptions::exclusive())
                .await
                .map(drop)
        }
    });
    assert!(
        support::eventually(Duration::from_secs(5), || server
            .cmd(&["EXISTS", "{tower-lock:k}:w"])
            .as_int()
            == Some(1))
        .await
    );
    server.cmd(&["DEL", "{tower-lock:k}"]);
    refused(&fair, "k", &LockOptions::fair()).await;
    drop(held);
    waiter.abort();
}
