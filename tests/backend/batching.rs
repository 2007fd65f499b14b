//! The requests of one process share a connection, and their commands go to Redis in batches:
//! each request must still get its own answer, one that stops waiting must cost the others
//! nothing, and a server that lost the scripts gets them again.

use std::time::Duration;

use tokio::task::JoinSet;
use tower_lock::{LockManager, LockOptions};

use crate::support::{eventually, RedisServer};

const REQUESTS: usize = 400;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_requests_get_their_own_answers_and_leaving_ones_cost_nothing() {
    let server = RedisServer::start();
    let manager = LockManager::redis(&server.url()).await.expect("manager");
    let opts = LockOptions::exclusive();
    let mut requests = JoinSet::new();
    for i in 0..REQUESTS {
        let manager = manager.clone();
        requests.spawn(async move {
            let key = format!("account:{i}");
            if i % 2 == 1 {
                // leaves while its acquire may still wait in a batch, or be on its way
                let wait = Duration::from_micros(20 * (i as u64 % 10));
                let _ = tokio::time::timeout(wait, manager.acquire(&key, &opts)).await;
                return None;
            }
            let owner = manager.owner();
            let guard = owner.acquire(&key, &opts).await.expect("acquire");
            let token = guard.fencing_token();
            // the same owner's second command on the lock: re-entered, under the same token
            let again = owner.acquire(&key, &opts).await.expect("re-enter");
            assert_eq!(again.fencing_token(), token, "{key}");
            drop(again);
            guard.release().await.expect("release");
            Some((key, token))
        });
    }
    let mut served = Vec::new();
    while let Some(outcome) = requests.join_next().await {
        served.extend(outcome.expect("request task"));
    }
    assert_eq!(served.len(), REQUESTS / 2);
    assert!(served.iter().all(|(_, token)| *token > 0));

    // Every lock is free again: the kept ones were released, and an acquire whose caller left
    // after Redis had granted it is undone by its manager.
    let other = LockManager::redis(&server.url())
        .await
        .expect("second manager");
    let mut free = 0;
    let all_free = eventually(Duration::from_secs(10), || {
        free = (0..REQUESTS)
            .filter(|i| {
                let key = format!("{{tower-lock:account%3A{i}}}");
                server.cmd(&["EXISTS", &key]).as_int() == Some(0)
            })
            .count();
        free == REQUESTS
    })
    .await;
    assert!(all_free, "{free} of {REQUESTS} locks free");
    let guard = other.try_acquire("account:1", &opts).await.expect("try");
    assert!(guard.is_some(), "a lock whose acquire was abandoned");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_lost_its_scripts_gets_them_again() {
    let server = RedisServer::start();
    let manager = LockManager::redis(&server.url()).await.expect("manager");
    let opts = LockOptions::exclusive();
    drop(manager.acquire("warm", &opts).await.expect("acquire"));
    let evalsha = server.command_calls("evalsha");

    server.cmd(&["SCRIPT", "FLUSH"]);
    let mut requests = JoinSet::new();
    for i in 0..20 {
        let manager = manager.clone();
        requests.spawn(async move {
            let guard = manager
                .acquire(&format!("after-flush:{i}"), &opts)
                .await
                .expect("acquire after SCRIPT FLUSH");
            guard.release().await.expect("release after SCRIPT FLUSH");
        });
    }
    while let Some(done) = requests.join_next().await {
        done.expect("request task");
    }
    assert!(
        server.command_calls("script|load") > 0,
        "the scripts were loaded again"
    );
    // the acquisitions take the free locks on the plain path; the releases are scripts
    assert!(server.command_calls("evalsha") >= evalsha + 20);
}
