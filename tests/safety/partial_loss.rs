//! A restart that loses part of a hold — an AOF cut back past a re-entry brings the hold back with
//! one re-entry fewer — lets the owner's first release free the lock while its other guard lives.
//! That guard is told at once (its `lost()` fires when the release is answered "freed"), not at
//! the next renewal, a third of a lease later. Found by the model (`tests/model`).

use std::time::Duration;

use tower_lock::{LockManager, LockOptions};

use super::support::{self, RedisServer};

/// Far below a renewal period (10 s with the default 30 s lease): told by the release, not by the
/// watchdog.
const TOLD: Duration = Duration::from_secs(2);

async fn manager(server: &RedisServer) -> LockManager {
    LockManager::builder()
        .redis(server.url())
        // every hold through Redis, where re-entries are counted
        .local_handoffs(0)
        .build()
        .await
        .expect("manager")
}

/// The lock hash's owner field (the one field not starting with '#').
fn owner_field(server: &RedisServer, lock: &str) -> String {
    let fields = server.cmd(&["HKEYS", lock]).as_strings().expect("HKEYS");
    fields
        .into_iter()
        .find(|f| !f.starts_with('#'))
        .expect("an owner field")
}

async fn a_release_that_frees_the_lock_tells_the_owners_other_guards(opts: LockOptions) {
    let server = RedisServer::start();
    let (m, other) = (manager(&server).await, manager(&server).await);
    let owner = m.owner();
    let first = owner.acquire("k", &opts).await.unwrap();
    let second = owner.acquire("k", &opts).await.unwrap();
    assert_eq!(first.fencing_token(), second.fencing_token());
    // what a restart from an AOF that lost the re-entry leaves: the hold, counted once
    let lock = "{tower-lock:k}";
    let field = owner_field(&server, lock);
    assert_eq!(
        server.cmd(&["HGET", lock, &field]).as_string().as_deref(),
        Some("2")
    );
    server.cmd(&["HSET", lock, &field, "1"]);

    first.release().await.unwrap();
    let info = second.info();
    let told = tokio::time::timeout(TOLD, info.lost()).await;
    assert!(
        told.is_ok(),
        "the other guard was not told its hold is gone"
    );
    // the lock is free for anyone: the guard's lost signal came before another process took it
    let taken = other.try_acquire("k", &opts).await.unwrap();
    assert!(taken.is_some(), "the lock should be free");
    assert!(support::eventually(Duration::from_secs(1), || second.is_lost()).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exclusive_release_that_frees_the_lock_tells_the_other_guards() {
    a_release_that_frees_the_lock_tells_the_owners_other_guards(LockOptions::exclusive()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fixed_lease_release_that_frees_the_lock_tells_the_other_guards() {
    let opts = LockOptions::exclusive().lease(Duration::from_secs(60));
    a_release_that_frees_the_lock_tells_the_owners_other_guards(opts).await;
}
