//! A manager on a Redis service under Sentinel (`LockManagerBuilder::sentinel`): it finds the
//! master through the Sentinels, and after a failover its commands and its inbox go to the new
//! master, with wake-ups between managers working there as before.

use std::time::Duration;

use tower_lock::{LockGuard, LockManager, LockOptions};

use crate::support::sentinel::{SentinelService, SERVICE};
use crate::support::{eventually, GENEROUS};

async fn manager(service: &SentinelService) -> LockManager {
    LockManager::builder()
        .sentinel(service.sentinel_urls(), SERVICE)
        .command_timeout(Duration::from_secs(1))
        .build()
        .await
        .expect("manager through the Sentinels")
}

/// `m2` waits for `key` while `m1` holds it with a long fixed lease; `m1`'s release must wake it
/// at once (the lease would keep it waiting 30 s).
async fn hand_over(m1: &LockManager, m2: &LockManager, key: &str) -> LockGuard {
    let long = LockOptions::exclusive().lease(Duration::from_secs(30));
    let held = m1.acquire(key, &long).await.expect("first holder");
    let waiting = tokio::spawn({
        let (m2, key) = (m2.clone(), key.to_owned());
        let opts = LockOptions::exclusive().wait_timeout(Duration::from_secs(10));
        async move { m2.acquire(&key, &opts).await }
    });
    assert!(eventually(GENEROUS, || m2.waiting() == 1).await, "m2 waits");
    let released = std::time::Instant::now();
    held.release().await.expect("release");
    let next = waiting.await.unwrap().expect("woken by the release");
    assert!(
        released.elapsed() < Duration::from_secs(5),
        "not woken: {:?}",
        released.elapsed()
    );
    next
}

/// Take `key` on `m`, retrying while the manager's connections still go to the old master (a
/// failed call marks them broken; the next opens on the master the Sentinels name).
async fn acquire_after_failover(m: &LockManager, key: &str) -> LockGuard {
    for _ in 0..100 {
        if let Ok(guard) = m.acquire(key, &LockOptions::exclusive()).await {
            return guard;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("no lock on the new master within 10 s");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manager_follows_its_master_through_a_failover() {
    let service = SentinelService::start();
    let (m1, m2) = (manager(&service).await, manager(&service).await);
    let before = hand_over(&m1, &m2, "k").await;
    assert_eq!(
        service.master.cmd(&["EXISTS", "{tower-lock:k}"]).as_int(),
        Some(1)
    );
    before.release().await.unwrap();

    service.fail_over();
    let after = acquire_after_failover(&m1, "moved").await;
    let on_new = service
        .replica
        .cmd(&["EXISTS", "{tower-lock:moved}"])
        .as_int();
    assert_eq!(on_new, Some(1), "the lock is on the new master");
    // m2's first call may still go to the old master (READONLY), which sends it to the new one
    let opts = LockOptions::exclusive();
    let mut answer = m2.try_acquire("moved", &opts).await;
    if answer.is_err() {
        answer = m2.try_acquire("moved", &opts).await;
    }
    let busy = answer.is_ok_and(|g| g.is_none());
    assert!(busy, "m2 took a lock m1 holds on the new master");
    after.release().await.unwrap();
    // both inboxes moved to the new master: a release there wakes the other manager at once
    let ours = |server: &crate::support::RedisServer| {
        let list = server
            .cmd(&["CLIENT", "LIST", "TYPE", "pubsub"])
            .as_string();
        let list = list.unwrap_or_default();
        list.lines()
            .filter(|l| l.contains("name=tower-lock:"))
            .count()
    };
    let inboxes = || ours(&service.replica) == 2 && ours(&service.master) == 0;
    assert!(
        eventually(GENEROUS, inboxes).await,
        "the inboxes did not move"
    );
    drop(acquire_after_failover(&m2, "warm").await);
    hand_over(&m1, &m2, "k2").await.release().await.unwrap();
}
