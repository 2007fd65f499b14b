//! Fair queues on Redis keep only live waiters: a queued waiter lives while its heartbeat key does,
//! and grants drop the waiters whose key ran out.

use std::time::{Duration, Instant};

use tower_lock::{LockManager, LockOptions};

use crate::support;
use crate::support::RedisServer;

async fn manager(server: &RedisServer) -> LockManager {
    LockManager::builder()
        .redis(server.url())
        .fair_eviction(Duration::from_millis(600))
        .build()
        .await
        .expect("manager")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn more_dead_waiters_than_one_grant_skips_are_all_dropped_and_the_live_one_is_served() {
    let server = RedisServer::start();
    let holder = manager(&server).await;
    let waiting = manager(&server).await;
    let held = holder.acquire("crowd", &LockOptions::fair()).await.unwrap();
    // 150 waiters queued first whose heartbeat keys have run out (their processes died): more than
    // one grant skips (100).
    for i in 1..=150 {
        let owner = format!("00000000-0000-0000-0000-000000000000:{i}");
        let added = server.cmd(&["RPUSH", "{tower-lock:crowd}:ql", &owner]);
        assert_eq!(added.as_int(), Some(i));
    }
    let waiter = {
        let waiting = waiting.clone();
        tokio::spawn(async move {
            let opts = LockOptions::fair().wait_timeout(Duration::from_secs(10));
            let g = waiting.acquire("crowd", &opts).await.expect("served");
            (Instant::now(), g)
        })
    };
    let queue_len = || server.cmd(&["LLEN", "{tower-lock:crowd}:ql"]).as_int();
    assert!(support::eventually(Duration::from_secs(5), || queue_len() == Some(151)).await);

    let released = Instant::now();
    held.release().await.unwrap();
    let (acquired, guard) = waiter.await.unwrap();
    // The release skipped 100 dead waiters and left the lock free; the live waiter's next heartbeat
    // (every 200 ms) found it free, and its retry dropped the other 50 and took its turn.
    let waited = acquired.duration_since(released);
    assert!(waited < Duration::from_secs(2), "served after {waited:?}");
    assert_eq!(queue_len(), Some(0), "every dead waiter dropped");
    guard.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grant_message_arriving_after_its_waiter_took_the_lock_does_not_release_it() {
    let server = RedisServer::start();
    let holder = manager(&server).await;
    let waiting = manager(&server).await;
    let held = holder.acquire("late", &LockOptions::fair()).await.unwrap();
    let waiter = {
        let waiting = waiting.clone();
        tokio::spawn(async move {
            let opts = LockOptions::fair().wait_timeout(Duration::from_secs(10));
            waiting.acquire("late", &opts).await.expect("served")
        })
    };
    let queue = "{tower-lock:late}:ql";
    assert!(
        support::eventually(Duration::from_secs(5), || server
            .cmd(&["LLEN", queue])
            .as_int()
            == Some(1))
        .await
    );
    // the queue entry names the wait (`<owner>|<n>`); the lock hash names the owner
    let entry = server
        .cmd(&["LRANGE", queue, "0", "0"])
        .as_strings()
        .unwrap()[0]
        .clone();
    let owner = entry.split('|').next().unwrap().to_owned();

    // The holder's release grants the lock to the waiter, but the message is held up: the grant
    // is made by hand (the fair mark naming the wait, as a grant sent by message does), and the
    // waiter's next heartbeat (every 200 ms) finds it out of the queue.
    let stale = "1";
    server.cmd(&["DEL", "{tower-lock:late}"]);
    server.cmd(&["LREM", queue, "1", &entry]);
    server.cmd(&["DEL", &format!("{{tower-lock:late}}:hb:{entry}")]);
    server.cmd(&[
        "HSET",
        "{tower-lock:late}",
        &owner,
        "1",
        "#t",
        stale,
        "#f",
        &entry,
    ]);
    server.cmd(&["PEXPIRE", "{tower-lock:late}", "5000"]);
    let guard = waiter.await.unwrap();
    assert!(guard.fencing_token() > 1, "a token of its own");
    drop(held); // its release finds the lock gone: nothing happens

    // Now the held-up message arrives; nobody waits for it any more.
    let manager_id = owner.split(':').next().unwrap();
    let message = format!("g|{{tower-lock:late}}|{entry}|{stale}");
    let told = server.cmd(&[
        "PUBLISH",
        &format!("{{tower-lock}}:inbox:{manager_id}"),
        &message,
    ]);
    assert_eq!(told.as_int(), Some(1));
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        server
            .cmd(&["HEXISTS", "{tower-lock:late}", &owner])
            .as_int(),
        Some(1),
        "the stale message released the lock from under its holder"
    );
    guard.release().await.expect("still held");
}
