//! Fair mode: a grant made to one request of an owner is that request's alone. Another request of
//! the same owner that has not queued for it (a `try_acquire`, or a wait begun after the grant's
//! guard was told it lost it) finds the lock busy: it never re-enters the grant's hold under the
//! grant's token.

use std::time::Duration;

use tower_lock::{LockManager, LockOptions};

use super::support::proxy::Proxy;
use super::support::{eventually, RedisServer};

/// A manager with cohorting off: its fair requests wait in Redis under their owners' own ids, as
/// the grants name them (with cohorting, an owner's requests meet in memory).
async fn manager(url: &str) -> LockManager {
    let builder = LockManager::builder().redis(url);
    builder.local_handoffs(0).build().await.unwrap()
}

/// The grant's message to the waiting request takes 300 ms through a proxy; meanwhile another
/// request of the same owner asks for the lock, and its command reaches Redis after the grant.
/// (Before, it re-entered the granted hold: a second guard under the first one's token.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grant_in_flight_is_not_reentered_by_another_request_of_its_owner() {
    let server = RedisServer::start();
    let proxy = Proxy::start(server.port());
    let (holding, waiting) = (manager(&server.url()).await, manager(&proxy.url()).await);
    let fair = LockOptions::fair();
    let held = holding.acquire("k", &fair).await.unwrap();
    let owner = waiting.owner();
    let first = tokio::spawn({
        let owner = owner.clone();
        async move { owner.acquire("k", &LockOptions::fair()).await.unwrap() }
    });
    let queued = || server.cmd(&["LLEN", "{tower-lock:k}:ql"]).as_int() == Some(1);
    assert!(eventually(Duration::from_secs(5), queued).await);

    proxy.set_delay(Duration::from_millis(150));
    held.release().await.unwrap();
    let other = owner.try_acquire("k", &fair).await.unwrap();
    let first = first.await.unwrap();
    assert!(
        other.is_none(),
        "another request of the owner re-entered the grant made to the first, under its token {}",
        first.fencing_token()
    );
    assert!(!first.is_lost());
    proxy.heal();
    let token = first.fencing_token();
    first.release().await.unwrap();
    // the lock is free again for the owner's next request, which gets a token of its own
    let next = owner.try_acquire("k", &fair).await.unwrap().expect("free");
    assert!(next.fencing_token() > token);
}

/// The same in memory, where a grant reaches its request in process: the other request asks
/// before the waiting one has run (one thread), and must find the lock busy. (Before, it took the
/// grant's hold for a stale one of its owner and the lock afresh: two guards of one owner, each
/// alone in its own eyes.)
#[tokio::test(flavor = "current_thread")]
async fn a_grant_not_yet_taken_is_not_taken_over_by_another_request_of_its_owner_in_memory() {
    let m = LockManager::builder()
        .local_handoffs(0)
        .build()
        .await
        .unwrap();
    let fair = LockOptions::fair();
    let held = m.acquire("k", &fair).await.unwrap();
    let owner = m.owner();
    let first = tokio::spawn({
        let owner = owner.clone();
        async move { owner.acquire("k", &LockOptions::fair()).await.unwrap() }
    });
    while m.queued() == 0 {
        tokio::task::yield_now().await;
    }
    held.release().await.unwrap();
    let other = owner.try_acquire("k", &fair).await.unwrap();
    let first = first.await.unwrap();
    assert!(
        other.is_none(),
        "another request of the owner took the lock granted to the first (tokens {} and {})",
        other.map_or(0, |g| g.fencing_token()),
        first.fencing_token()
    );
    assert!(!first.is_lost());
}
