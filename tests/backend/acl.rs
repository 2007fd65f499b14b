//! An ACL user restricted to what the crate needs (the README's line, "Redis requirements" > "ACL
//! users", kept in sync by hand): managers as that user, in a database other than 0, through
//! exclusive and fair locks, wake-ups, fencing, renewals, a cancelled wait and release, and the
//! takeover of a dead holder, with nothing denied.

use std::time::Duration;

use tower_lock::{LockManager, LockOptions};

use crate::hand_over::hand_over;
use crate::support::RedisServer;
use crate::support::{eventually, GENEROUS};

/// The README's `ACL SETUSER` line for the namespace `tower-lock`, with the test's password.
const SETUSER: &[&str] = &[
    "ACL",
    "SETUSER",
    "locker",
    "reset",
    "on",
    ">locker-pw",
    "~{tower-lock:*",
    "&{tower-lock}:inbox:*",
    "+evalsha",
    "+script|load",
    "+subscribe",
    "+ping",
    "+client|setname",
    "+select",
    // inside the scripts
    "+del",
    "+exists",
    "+get",
    "+getdel",
    "+hdel",
    "+hexists",
    "+hget",
    "+hgetall",
    "+hincrby",
    "+hmget",
    "+hset",
    "+info",
    "+lindex",
    "+lpop",
    "+lpos",
    "+lrem",
    "+pexpire",
    "+pttl",
    "+publish",
    "+pubsub|numsub",
    "+rpush",
    "+set",
    "+time",
    "+type",
    "+zadd",
    "+zcard",
    "+zpopmin",
    "+zrange",
    "+zrangebyscore",
    "+zrem",
    "+zscore",
];

fn locker_url(server: &RedisServer, namespace_db: u8) -> String {
    format!(
        "redis://locker:locker-pw@127.0.0.1:{}/{namespace_db}",
        server.port()
    )
}

async fn manager(url: &str, namespace: &str) -> Result<LockManager, tower_lock::LockError> {
    LockManager::builder()
        .redis(url)
        .namespace(namespace)
        .takeover()
        .build()
        .await
}

/// A lease outlives its length through renewals, and a cancelled fair waiter leaves the queue.
async fn renew_and_cancel(url: &str, second: &LockManager) {
    let short = LockManager::builder()
        .redis(url)
        .lease(Duration::from_millis(600));
    let short = short.build().await.expect("manager with a short lease");
    let renewed = short.acquire("r", &LockOptions::exclusive()).await.unwrap();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(!renewed.is_lost(), "renewed past its 600 ms lease");
    renewed.release().await.expect("still held");
    let read = short.acquire("r", &LockOptions::read()).await.unwrap();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(!read.is_lost(), "a read hold renewed past its 600 ms lease");
    read.release().await.expect("still held");

    let held = short.acquire("q", &LockOptions::fair()).await.unwrap();
    let waiter = {
        let second = second.clone();
        tokio::spawn(async move { second.acquire("q", &LockOptions::fair()).await })
    };
    assert!(eventually(GENEROUS, || second.queued() == 1).await);
    waiter.abort();
    assert!(eventually(GENEROUS, || second.queued() == 0).await);
    held.release().await.unwrap();
    let deadline = tokio::time::Instant::now() + GENEROUS;
    loop {
        let taken = second.try_acquire("q", &LockOptions::fair()).await.unwrap();
        if let Some(guard) = taken {
            guard.release().await.unwrap();
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the lock stays free"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A hold of a manager that then dies (dropping its runtime closes its connections, as a killed
/// process's would), taken over by `waiter`: its probes read the hold, find the inbox missing,
/// mark it under the server's run id and end it a grace later, long before the 30 s lease.
async fn take_over_a_dead_holder(url: &str, waiter: &LockManager) {
    let url = url.to_owned();
    let holder = std::thread::spawn(move || {
        let runtime = tokio::runtime::Runtime::new().expect("runtime");
        runtime.block_on(async {
            let dead = manager(&url, "tower-lock").await.expect("holder");
            let opts = LockOptions::exclusive();
            std::mem::forget(dead.acquire("dead", &opts).await.unwrap());
        });
    });
    holder.join().expect("the holder's thread");
    let busy = waiter.try_acquire("dead", &LockOptions::exclusive()).await;
    assert!(busy.unwrap().is_none(), "the dead holder's lock is free");
    let opts = LockOptions::exclusive().wait_timeout(Duration::from_secs(10));
    let taken = waiter.acquire("dead", &opts).await.expect("taken over");
    taken.release().await.unwrap();
}

/// The entries of `ACL LOG`: every command, key or channel the server denied.
fn denied(server: &RedisServer) -> usize {
    let reply = server.cmd(&["ACL", "LOG"]);
    match reply {
        crate::support::Reply::Array(Some(entries)) => entries.len(),
        other => panic!("ACL LOG: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_managers_lock_as_a_user_restricted_to_what_the_crate_needs() {
    let server = RedisServer::start();
    assert!(server.cmd(SETUSER).is_ok(), "ACL SETUSER");
    let url = locker_url(&server, 3);
    let first = manager(&url, "tower-lock").await.expect("first manager");
    let second = manager(&url, "tower-lock").await.expect("second manager");
    hand_over(&first, &second, LockOptions::exclusive()).await;
    hand_over(&first, &second, LockOptions::fair()).await;
    hand_over(&first, &second, LockOptions::write()).await;
    hand_over(&first, &second, LockOptions::semaphore(1)).await;
    renew_and_cancel(&url, &second).await;
    take_over_a_dead_holder(&url, &second).await;

    let held = first.acquire("k", &LockOptions::exclusive()).await.unwrap();
    let keyspace = server.info("keyspace");
    assert!(
        keyspace.contains("db3:"),
        "the keys are in db 3: {keyspace}"
    );
    assert!(!keyspace.contains("db0:"), "nothing in db 0: {keyspace}");
    held.release().await.unwrap();
    assert_eq!(denied(&server), 0, "{:?}", server.cmd(&["ACL", "LOG"]));

    // the restriction is real: another namespace's keys and inbox are refused
    let outsider = manager(&url, "other").await;
    let err = outsider.expect_err("the inbox channel {other}:inbox:* is not allowed");
    assert!(err.to_string().to_lowercase().contains("noperm"), "{err}");
}
