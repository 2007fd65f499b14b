//! Fair mode: a grant message meant for an earlier wait of the same owner, delivered late, is not
//! taken by the owner's later request: grants are bound to the wait they were made to.

use std::time::Duration;

use tower_lock::{LockManager, LockOptions, LockOwner};

use super::support::{eventually, RedisServer};
use super::watch::nobody_else_takes_it;

/// A manager with cohorting off: its fair requests hold and wait in Redis under their owners'
/// own ids, as requests with a fixed lease do, and as these grants name them. (With cohorting,
/// a leader's id of its own takes the lock, and an owner's requests meet in memory.)
async fn manager(server: &RedisServer) -> LockManager {
    let builder = LockManager::builder().redis(server.url());
    builder.local_handoffs(0).build().await.unwrap()
}

/// The owner id holding `lock`: a free lock is taken on the plain path, as a string naming it
/// (after `!` in fair mode, before `|` and the hold's number); a hash names it as its one field
/// that is not a mark.
fn holder_of(server: &RedisServer, lock: &str) -> String {
    if server.cmd(&["TYPE", lock]).as_string().as_deref() == Some("string") {
        // `[!]<owner id>|<n>`
        let value = server.cmd(&["GET", lock]).as_string().unwrap();
        let owner = value.trim_start_matches('!').split('|').next().unwrap();
        return owner.to_owned();
    }
    let fields = server.cmd(&["HKEYS", lock]).as_strings().unwrap();
    fields.into_iter().find(|f| !f.starts_with('#')).unwrap()
}

/// `owner` waits for the fair lock `k`, held by someone else, and gives up (its wait times out);
/// the name of that wait, read from the queue while it was there. Returns once the wait has left
/// the queue.
async fn a_wait_that_gave_up(server: &RedisServer, owner: &LockOwner) -> String {
    let queue = "{tower-lock:k}:ql";
    let gave_up = tokio::spawn({
        let owner = owner.clone();
        let opts = LockOptions::fair().wait_timeout(Duration::from_millis(500));
        async move { owner.acquire("k", &opts).await.map(drop) }
    });
    let queued = |n| move || server.cmd(&["LLEN", queue]).as_int().unwrap_or(0) == n;
    assert!(eventually(Duration::from_secs(5), queued(1)).await);
    let entries = server.cmd(&["LRANGE", queue, "0", "-1"]).as_strings();
    let wait = entries.unwrap().remove(0);
    assert!(gave_up.await.unwrap().is_err(), "the first wait timed out");
    assert!(eventually(Duration::from_secs(5), queued(0)).await);
    wait
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
    let earlier_wait = a_wait_that_gave_up(&server, &owner).await;

    held.release().await.unwrap();
    let holder = last.acquire("k", &fair).await.unwrap();
    let later = tokio::spawn({
        let owner = owner.clone();
        async move {
            let guard = owner.acquire("k", &fair).await.unwrap();
            (guard.fencing_token(), guard.is_lost(), guard)
        }
    });
    assert!(
        eventually(Duration::from_secs(5), || server
            .cmd(&["LLEN", queue])
            .as_int()
            == Some(1))
        .await
    );

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

/// The owner's earlier wait is still first in the queue, alive (its withdrawal has not run yet),
/// when the lock falls free and the owner's next request tries: the lock is granted to the earlier
/// wait, and the new request must not take that grant for its own (the grant goes on to it only
/// once the earlier wait's grant is passed on). Before, the new request returned at once with the
/// earlier wait's grant, which the inbox then passed on from under it: another manager took the
/// lock while the guard was not lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grant_to_an_owners_earlier_wait_is_not_taken_by_its_next_request() {
    let server = RedisServer::start();
    let (first, waiting, rival) = (
        manager(&server).await,
        manager(&server).await,
        manager(&server).await,
    );
    let fair = LockOptions::fair();
    let queue = "{tower-lock:k}:ql";
    let held = first.acquire("k", &fair).await.unwrap();
    let owner = waiting.owner();
    let earlier_wait = a_wait_that_gave_up(&server, &owner).await;

    // as if the earlier wait's withdrawal had not run yet, and the holder's lease had run out
    server.cmd(&["RPUSH", queue, &earlier_wait]);
    let heartbeat = format!("{{tower-lock:k}}:hb:{earlier_wait}");
    server.cmd(&["SET", &heartbeat, "1", "PX", "10000"]);
    server.cmd(&["DEL", "{tower-lock:k}"]);
    drop(held);

    let opts = fair.wait_timeout(Duration::from_secs(5));
    let guard = owner.acquire("k", &opts).await.unwrap();
    nobody_else_takes_it(&rival, "k", &fair, &guard, Duration::from_secs(1)).await;
    guard.release().await.unwrap();
}

/// A grant made to an owner's earlier wait after that wait gave up, found by the owner's next
/// request before the grant's message is read: that request does not share it (it neither queued
/// for it nor holds it) but queues; the message, read then, is passed on, and the lock comes to
/// the queued request under a token of its own. (Before, the request re-entered the grant's hold
/// under the grant's token.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unused_grant_found_by_the_owner_is_passed_on_not_shared() {
    let server = RedisServer::start();
    let (waiting, rival) = (manager(&server).await, manager(&server).await);
    let fair = LockOptions::fair();
    let owner = waiting.owner();
    // learn the owner's id; its earlier wait is one it never made in this process
    let probe = owner.acquire("k", &fair).await.unwrap();
    let owner_id = holder_of(&server, "{tower-lock:k}");
    probe.release().await.unwrap();
    let earlier_wait = format!("{owner_id}|999");

    // the release script granted the free lock to the earlier wait, which had given up
    let token = "1";
    let lock = "{tower-lock:k}";
    server.cmd(&[
        "HSET",
        lock,
        &owner_id,
        "1",
        "#t",
        token,
        "#f",
        &earlier_wait,
    ]);
    server.cmd(&["PEXPIRE", lock, "30000"]);
    let next = tokio::spawn({
        let owner = owner.clone();
        async move { owner.acquire("k", &LockOptions::fair()).await.unwrap() }
    });
    let queued = || server.cmd(&["LLEN", "{tower-lock:k}:ql"]).as_int() == Some(1);
    assert!(eventually(Duration::from_secs(5), queued).await);
    assert_eq!(server.cmd(&["HGET", lock, &owner_id]).as_int(), Some(1));
    // the grant's message arrives now: nobody waits as that wait, so it is passed on
    let manager_id = owner_id.split(':').next().unwrap();
    let channel = format!("{{tower-lock}}:inbox:{manager_id}");
    let message = format!("g|{lock}|{earlier_wait}|{token}");
    assert_eq!(
        server.cmd(&["PUBLISH", &channel, &message]).as_int(),
        Some(1)
    );
    let guard = tokio::time::timeout(Duration::from_secs(5), next)
        .await
        .expect("the lock came to the queued request")
        .unwrap();
    assert!(guard.fencing_token() > 1, "the grant's token was shared");
    assert_eq!(server.cmd(&["HGET", lock, &owner_id]).as_int(), Some(1));
    assert!(!guard.is_lost());
    guard.release().await.unwrap();
    assert!(rival.try_acquire("k", &fair).await.unwrap().is_some());
}

/// A queued request that finds a used grant of its owner (no wait named) that the owner does not
/// hold in memory — no guard of it has that hold — neither re-enters it nor shares it: it takes
/// the lock afresh, under a new token, as the hold's only owner, and leaves the queue; its
/// release frees the lock. (Before, it took that hold over as its own: two holders' worth of
/// count on one hold, and the lock stayed held after the last guard went. A hold the owner does
/// have is re-entered: `stale_reentry.rs` and the re-entry tests.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queued_request_does_not_reenter_a_grant_its_owner_does_not_hold() {
    let server = RedisServer::start();
    let (waiting, rival) = (manager(&server).await, manager(&server).await);
    let fair = LockOptions::fair();
    let owner = waiting.owner();
    let probe = owner.acquire("k", &fair).await.unwrap();
    let lock = "{tower-lock:k}";
    let owner_id = holder_of(&server, lock);
    probe.release().await.unwrap();

    // another manager holds the lock for 2 s; the owner's request queues behind it
    let short = fair.lease(Duration::from_secs(2));
    let held = rival.acquire("k", &short).await.unwrap();
    let queued = tokio::spawn({
        let owner = owner.clone();
        async move { owner.acquire("k", &fair).await.unwrap() }
    });
    let queue = "{tower-lock:k}:ql";
    assert!(
        eventually(Duration::from_secs(5), || server
            .cmd(&["LLEN", queue])
            .as_int()
            == Some(1))
        .await
    );
    // meanwhile Redis shows a grant of the owner, used, that no guard of the owner holds
    std::mem::forget(held);
    server.cmd(&["DEL", lock]);
    server.cmd(&["HSET", lock, &owner_id, "1", "#t", "1", "#f", "1"]);
    server.cmd(&["PEXPIRE", lock, "30000"]);
    // the queued request retries when the rival's lease would have run out
    let guard = tokio::time::timeout(Duration::from_secs(5), queued)
        .await
        .expect("the queued request took the lock")
        .unwrap();
    assert_eq!(server.cmd(&["HGET", lock, &owner_id]).as_int(), Some(1));
    assert!(
        guard.fencing_token() > 1,
        "a new token, not the unheld hold's"
    );
    assert_eq!(server.cmd(&["LLEN", queue]).as_int(), Some(0));
    guard.release().await.unwrap();
    assert_eq!(server.cmd(&["EXISTS", lock]).as_int(), Some(0));
    assert!(rival.try_acquire("k", &fair).await.unwrap().is_some());
}
