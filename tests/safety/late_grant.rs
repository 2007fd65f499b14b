//! Fair mode: a grant message meant for an earlier wait of the same owner, delivered late, is not
//! taken by the owner's later request: grants are bound to the wait they were made to.

use std::time::Duration;

use tower_lock::{LockManager, LockOptions};

use super::support::{wait_until, RedisServer};

async fn manager(server: &RedisServer) -> LockManager {
    LockManager::redis(&server.url()).await.unwrap()
}

/// An owner waits for a fair lock and gives up (its wait times out); the lock goes to another
/// manager; the owner waits again. A grant message naming the first wait (as Redis would have sent
/// it had the lock been granted to that wait, read only now) must not hand the lock to the second
/// wait while the other manager holds it. (Before, grants were routed by owner, and the second
/// request returned a guard with is_lost() false beside the real holder.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_grant_of_an_earlier_wait_is_not_taken_by_a_later_one() {
    let server = RedisServer::start();
    let (first, waiting, last) = (
        manager(&server).await,
        manager(&server).await,
        manager(&server).await,
    );
    let fair = LockOptions::fair();
    let queue = "{tower-lock:k}:ql";
    let held = first.acquire("k", &fair).await.unwrap();

    let owner = waiting.owner();
    let gave_up = tokio::spawn({
        let owner = owner.clone();
        let opts = fair.wait_timeout(Duration::from_millis(500));
        async move { owner.acquire("k", &opts).await.map(drop) }
    });
    assert!(wait_until(Duration::from_secs(5), || server
        .cmd(&["LLEN", queue])
        .as_int()
        == Some(1)));
    let entries = server.cmd(&["LRANGE", queue, "0", "-1"]).as_strings();
    let earlier_wait = entries.unwrap().remove(0);
    assert!(gave_up.await.unwrap().is_err(), "the first wait timed out");
    assert!(wait_until(Duration::from_secs(5), || server
        .cmd(&["LLEN", queue])
        .as_int()
        .unwrap_or(0)
        == 0));

    held.release().await.unwrap();
    let holder = last.acquire("k", &fair).await.unwrap();
    let later = tokio::spawn({
        let owner = owner.clone();
        async move {
            let guard = owner.acquire("k", &fair).await.unwrap();
            (guard.fencing_token(), guard.is_lost(), guard)
        }
    });
    assert!(wait_until(Duration::from_secs(5), || server
        .cmd(&["LLEN", queue])
        .as_int()
        == Some(1)));

    let manager_id = earlier_wait.split(':').next().unwrap();
    let channel = format!("{{tower-lock}}:inbox:{manager_id}");
    let stale = holder.fencing_token() - 1;
    let message = format!("g|{{tower-lock:k}}|{earlier_wait}|{stale}");
    assert_eq!(
        server.cmd(&["PUBLISH", &channel, &message]).as_int(),
        Some(1)
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        !later.is_finished(),
        "the later request took the earlier wait's grant while another manager held the lock"
    );
    assert!(!holder.is_lost());
    let holder_token = holder.fencing_token();
    holder.release().await.unwrap();
    let (token, lost, guard) = tokio::time::timeout(Duration::from_secs(5), later)
        .await
        .expect("the later request gets the lock once it is free")
        .unwrap();
    assert!(token > holder_token && !lost);
    guard.release().await.unwrap();
}
