//! `LockManager::force_release`, on memory and on a real redis-server: every hold of the lock
//! ends, the lock passes on to its waiters as on a release, the next token is above every token
//! the old holders had (their blocks included), and each old holder's `lost()` fires at its next
//! renewal.

use std::time::Duration;

use tower_lock::{LockGuard, LockManager, LockOptions, LockState};

use crate::support::fixture::Fixture;
use crate::support::GENEROUS;

/// Tokens a hold reserves with it (`TOKEN_BLOCK`): its process may hand them out itself.
const TOKEN_BLOCK: u64 = 64;

/// The short lease of the old holders: their watchdog renews every 200 ms.
const SHORT_LEASE: Duration = Duration::from_millis(600);

crate::on_both_backends!(
    a_held_lock_goes_to_its_waiter_above_every_old_token,
    a_fair_queue_goes_on_in_order,
    every_read_hold_ends_and_the_write_waiter_gets_the_lock,
    every_permit_of_a_semaphore_ends,
    a_free_lock_is_not_released,
);

/// The holders' manager, with a short lease, and the manager of the waiters and the operator
/// (in memory, one manager is every process).
async fn managers(fx: &Fixture) -> (LockManager, LockManager) {
    let builder = LockManager::builder().lease(SHORT_LEASE);
    let builder = match fx {
        Fixture::Memory(_) => {
            let m = builder.build().await.expect("memory manager");
            return (m.clone(), m);
        }
        Fixture::Redis(server) => builder.redis(server.url()),
        #[cfg(feature = "cluster")]
        Fixture::Cluster(cluster) => builder.cluster(cluster.urls()),
    };
    (builder.build().await.expect("manager"), fx.manager().await)
}

/// The state of `key`, once `ready` holds for it (a waiter reaches the server after its call).
async fn state_when(m: &LockManager, key: &str, ready: impl Fn(&LockState) -> bool) -> LockState {
    let deadline = tokio::time::Instant::now() + GENEROUS;
    loop {
        let state = m.inspect(key).await.expect("inspect");
        if ready(&state) || tokio::time::Instant::now() > deadline {
            return state;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// `guard`'s `lost()` fires within a renewal period and then some.
async fn lost_soon(guard: &LockGuard) {
    let bound = SHORT_LEASE + Duration::from_secs(2);
    tokio::time::timeout(bound, guard.lost())
        .await
        .expect("the old holder learns it lost the lock");
    assert!(guard.is_lost());
}

fn waiting(options: LockOptions) -> LockOptions {
    options.wait_timeout(GENEROUS)
}

async fn a_held_lock_goes_to_its_waiter_above_every_old_token(fx: Fixture) {
    let (holders, others) = managers(&fx).await;
    let old = holders
        .acquire("force:x", &LockOptions::exclusive())
        .await
        .unwrap();
    let waiter = tokio::spawn({
        let others = others.clone();
        async move {
            let options = waiting(LockOptions::exclusive());
            others.acquire("force:x", &options).await
        }
    });
    if fx.is_memory() {
        tokio::time::sleep(Duration::from_millis(100)).await;
    } else {
        let state = state_when(&others, "force:x", |s| !s.waiters.is_empty()).await;
        assert_eq!(state.waiters.len(), 1, "the waiter is recorded: {state:?}");
    }
    assert!(!waiter.is_finished(), "the waiter waits for the holder");
    assert!(others.force_release("force:x").await.unwrap());
    let new = tokio::time::timeout(GENEROUS, waiter)
        .await
        .expect("the waiter gets the lock")
        .unwrap()
        .unwrap();
    assert!(
        new.fencing_token() >= old.fencing_token() + TOKEN_BLOCK,
        "{} must pass the old block from {}",
        new.fencing_token(),
        old.fencing_token()
    );
    lost_soon(&old).await;
    assert!(!new.is_lost());
    drop(old);
    new.release().await.unwrap();
}

async fn a_fair_queue_goes_on_in_order(fx: Fixture) {
    let (holders, others) = managers(&fx).await;
    let old = holders
        .acquire("force:f", &LockOptions::fair())
        .await
        .unwrap();
    // one manager per waiter: two requests of one process queue in that process, one at a time
    let second = match fx.is_memory() {
        true => others.clone(),
        false => fx.manager().await,
    };
    let mut waits = Vec::new();
    for (i, m) in [others.clone(), second].into_iter().enumerate() {
        waits.push(tokio::spawn(async move {
            m.acquire("force:f", &waiting(LockOptions::fair())).await
        }));
        let state = state_when(&others, "force:f", |s| s.waiters.len() == i + 1).await;
        assert_eq!(state.waiters.len(), i + 1, "waiter {i} queued: {state:?}");
    }
    assert!(others.force_release("force:f").await.unwrap());
    let first = tokio::time::timeout(GENEROUS, waits.remove(0))
        .await
        .expect("the first waiter gets the lock")
        .unwrap()
        .unwrap();
    assert!(first.fencing_token() >= old.fencing_token() + TOKEN_BLOCK);
    let state = others.inspect("force:f").await.unwrap();
    assert_eq!(state.waiters.len(), 1, "the second still waits: {state:?}");
    assert!(!waits[0].is_finished());
    lost_soon(&old).await;
    let first_token = first.fencing_token();
    first.release().await.unwrap();
    let second = tokio::time::timeout(GENEROUS, waits.remove(0))
        .await
        .expect("the second waiter gets the lock")
        .unwrap()
        .unwrap();
    assert!(second.fencing_token() > first_token);
    second.release().await.unwrap();
}

async fn every_read_hold_ends_and_the_write_waiter_gets_the_lock(fx: Fixture) {
    let (holders, others) = managers(&fx).await;
    let reads = [
        holders
            .acquire("force:rw", &LockOptions::read())
            .await
            .unwrap(),
        holders
            .acquire("force:rw", &LockOptions::read())
            .await
            .unwrap(),
    ];
    let writer = tokio::spawn({
        let others = others.clone();
        async move {
            let options = waiting(LockOptions::write());
            others.acquire("force:rw", &options).await
        }
    });
    let state = state_when(&others, "force:rw", |s| !s.waiters.is_empty()).await;
    assert_eq!(state.waiters.len(), 1, "the write is queued: {state:?}");
    assert!(others.force_release("force:rw").await.unwrap());
    let write = tokio::time::timeout(GENEROUS, writer)
        .await
        .expect("the write gets the lock")
        .unwrap()
        .unwrap();
    for read in &reads {
        assert!(write.fencing_token() >= read.fencing_token() + TOKEN_BLOCK);
    }
    for read in &reads {
        lost_soon(read).await;
    }
    let state = others.inspect("force:rw").await.unwrap();
    assert_eq!(
        state.holders.len(),
        1,
        "the write alone holds it: {state:?}"
    );
    drop(reads);
    write.release().await.unwrap();
}

async fn every_permit_of_a_semaphore_ends(fx: Fixture) {
    let (holders, others) = managers(&fx).await;
    let permits = LockOptions::semaphore(2);
    let held = [
        holders.acquire("force:s", &permits).await.unwrap(),
        holders.acquire("force:s", &permits).await.unwrap(),
    ];
    let waiter = tokio::spawn({
        let others = others.clone();
        async move { others.acquire("force:s", &waiting(permits)).await }
    });
    let state = state_when(&others, "force:s", |s| !s.waiters.is_empty()).await;
    assert_eq!(state.waiters.len(), 1, "the third is queued: {state:?}");
    assert!(others.force_release("force:s").await.unwrap());
    let granted = tokio::time::timeout(GENEROUS, waiter)
        .await
        .expect("the waiter gets a permit")
        .unwrap()
        .unwrap();
    for permit in &held {
        assert!(granted.fencing_token() > permit.fencing_token());
        lost_soon(permit).await;
    }
    drop(held);
    granted.release().await.unwrap();
}

async fn a_free_lock_is_not_released(fx: Fixture) {
    let (holders, others) = managers(&fx).await;
    assert!(!others.force_release("force:free").await.unwrap());
    let guard = holders
        .acquire("force:free", &LockOptions::exclusive())
        .await
        .unwrap();
    guard.release().await.unwrap();
    assert!(!others.force_release("force:free").await.unwrap());
    // a second force finds nothing left to end
    let _held = holders
        .acquire("force:free", &LockOptions::exclusive())
        .await
        .unwrap();
    assert!(others.force_release("force:free").await.unwrap());
    assert!(!others.force_release("force:free").await.unwrap());
}
