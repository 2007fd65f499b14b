//! Exclusive and fair requests on one lock: they exclude each other, and each gets the lock in
//! turn, within a hand-off of its release — a fair request waits in the queue behind an exclusive
//! holder, an exclusive request finding fair state queues with the fair ones, and exclusive
//! requests recorded as waiting are woken to queue when the first fair request comes. An exclusive
//! request that loses a race for the lock queues too: no waiter starves.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tower_lock::{LockGuard, LockManager, LockOptions};

use super::support;
use support::fixture::Fixture;

/// Far below the watchdog lease (30 s): a waiter served within it was handed the lock by the
/// release, not by the lease running out.
const HAND_OFF: Duration = Duration::from_secs(5);

/// Wait for `key` on `m` in the background; the guard comes back through the handle.
fn waiting(
    m: &LockManager,
    key: &'static str,
    opts: LockOptions,
) -> tokio::task::JoinHandle<LockGuard> {
    let m = m.clone();
    tokio::spawn(async move { m.acquire(key, &opts).await.expect("a turn") })
}

/// `held` excludes a request of the other mode until it is released; then that request gets the
/// lock at once, under a larger token.
async fn hands_over(m: &LockManager, other: &LockManager, key: &'static str, held: LockOptions) {
    let next = match held.mode_value() {
        tower_lock::Mode::Fair => LockOptions::exclusive(),
        _ => LockOptions::fair(),
    };
    let holder = m.acquire(key, &held).await.unwrap();
    assert!(other.try_acquire(key, &next).await.unwrap().is_none());
    let waiter = waiting(other, key, next);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!waiter.is_finished(), "{key}: both modes held at once");
    let token = holder.fencing_token();
    holder.release().await.unwrap();
    let next_holder = tokio::time::timeout(HAND_OFF, waiter)
        .await
        .expect("handed over on release")
        .unwrap();
    assert!(next_holder.fencing_token() > token);
    next_holder.release().await.unwrap();
}

async fn exclusive_and_fair_requests_share_one_lock(fixture: Fixture) {
    let (m, other) = (fixture.manager().await, fixture.manager().await);
    hands_over(&m, &other, "f", LockOptions::fair()).await;
    hands_over(&m, &other, "e", LockOptions::exclusive()).await;
    // free again, a lock takes either mode
    let exclusive = other.acquire("f", &LockOptions::exclusive()).await.unwrap();
    exclusive.release().await.unwrap();
    let fair = other.acquire("e", &LockOptions::fair()).await.unwrap();
    fair.release().await.unwrap();
}

/// An exclusive request waits for a held lock; a fair one comes after it. The release serves both
/// in turn, one at a time, each within a hand-off: the fair request does not strand the
/// exclusive one (whose wake-ups a fair release would not send).
async fn a_fair_request_behind_an_exclusive_waiter_strands_nobody(fixture: Fixture) {
    let (holder, first, second) = (
        fixture.manager().await,
        fixture.manager().await,
        fixture.manager().await,
    );
    let held = holder
        .acquire("k", &LockOptions::exclusive())
        .await
        .unwrap();
    let exclusive = waiting(&first, "k", LockOptions::exclusive());
    if let Some(server) = fixture.server() {
        let recorded = || server.cmd(&["EXISTS", "{tower-lock:k}:w"]).as_int() == Some(1);
        assert!(support::eventually(HAND_OFF, recorded).await);
    } else {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let fair = waiting(&second, "k", LockOptions::fair());
    tokio::time::sleep(Duration::from_millis(100)).await;
    held.release().await.unwrap();
    let inside = Arc::new(AtomicBool::new(false));
    let turn = |handle: tokio::task::JoinHandle<LockGuard>| {
        let inside = inside.clone();
        async move {
            let guard = tokio::time::timeout(HAND_OFF, handle)
                .await
                .expect("served within a hand-off")
                .unwrap();
            assert!(!inside.swap(true, Ordering::SeqCst), "two holders at once");
            tokio::time::sleep(Duration::from_millis(20)).await;
            inside.store(false, Ordering::SeqCst);
            guard.release().await.unwrap();
        }
    };
    tokio::join!(turn(exclusive), turn(fair));
}

/// A request that releases the lock and takes it again at once, over and over, wins every race
/// with a waiter whose messages and attempts are slower (a proxy delays them): each time the
/// waiter is told the lock is free, it finds it taken again. Once the waiter has lost that race
/// it queues, and the next release is its turn.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exclusive_waiter_that_loses_a_race_queues() {
    let server = support::RedisServer::start();
    let proxy = support::proxy::Proxy::start(server.port());
    let barger = LockManager::redis(&server.url()).await.unwrap();
    let patient = LockManager::redis(&proxy.url()).await.unwrap();
    let opts = LockOptions::exclusive();
    let mut held = barger.acquire("hot", &opts).await.unwrap();
    proxy.set_delay(Duration::from_millis(30));
    let waiter = waiting(&patient, "hot", opts);
    let mut barges = 0;
    while barges < 20 {
        tokio::time::sleep(Duration::from_millis(150)).await;
        held.release().await.unwrap();
        let briefly = opts.wait_timeout(Duration::from_millis(200));
        match barger.acquire("hot", &briefly).await {
            Ok(guard) => held = guard,
            Err(_) => break,
        }
        barges += 1;
    }
    let guard = tokio::time::timeout(HAND_OFF, waiter)
        .await
        .expect("the waiter was served")
        .unwrap();
    assert!(barges <= 3, "the waiter waited through {barges} barges");
    guard.release().await.unwrap();
}

crate::on_both_backends!(
    exclusive_and_fair_requests_share_one_lock,
    a_fair_request_behind_an_exclusive_waiter_strands_nobody,
);
