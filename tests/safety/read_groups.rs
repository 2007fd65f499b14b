//! Read groups: the reads of one process that opted in to cohort order share one read hold in
//! Redis, up to the bound of local hand-offs. A write of another process still gets its turn and
//! never overlaps a read; tokens rise within a group; a re-entry stays in its group; an upgrade is
//! refused at once; a lost or possibly forgotten hold takes no new member; waiting reads that
//! leave, and the shutdown, leave nothing behind.

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tower_lock::{LockError, LockGuard, LockManager, LockOptions};

use super::support;
use support::RedisServer;

/// A manager renewing its leases every 300 ms, so that a hold found gone is lost at once.
async fn manager(server: &RedisServer, handoffs: u32) -> LockManager {
    manager_with_lease(server, handoffs, Duration::from_millis(900)).await
}

async fn manager_with_lease(server: &RedisServer, handoffs: u32, lease: Duration) -> LockManager {
    LockManager::builder()
        .redis(server.url())
        .local_handoffs(handoffs)
        .lease(lease)
        .build()
        .await
        .expect("manager")
}

fn read() -> LockOptions {
    LockOptions::read().cohort_order()
}

/// How many owners hold the read/write lock `key` in Redis.
fn redis_holders(server: &RedisServer, key: &str) -> i64 {
    let holders = format!("{{tower-lock:{key}}}:s");
    server.cmd(&["ZCARD", &holders]).as_int().unwrap_or(0)
}

fn held_in_redis(server: &RedisServer, key: &str) -> bool {
    let lock = format!("{{tower-lock:{key}}}");
    server.cmd(&["EXISTS", &lock]).as_int() == Some(1)
}

/// The guard a spawned request got, within 5 s; `what` names the request in the failure.
async fn granted(
    request: tokio::task::JoinHandle<Result<LockGuard, LockError>>,
    what: &str,
) -> LockGuard {
    tokio::time::timeout(Duration::from_secs(5), request)
        .await
        .unwrap_or_else(|_| panic!("{what} never got the lock"))
        .expect("request task")
        .unwrap_or_else(|err| panic!("{what}: {err:?}"))
}

/// Twelve reads of one process at once, with a bound of 4: they share three holds in Redis (a
/// leader and 4 members each), each member under the next token of its leader's block; every
/// hold goes with the last read of its group.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_of_one_process_share_holds_up_to_the_bound() {
    let server = RedisServer::start();
    let m = manager(&server, 4).await;
    let mut guards = Vec::new();
    for _ in 0..12 {
        guards.push(m.acquire("doc", &read()).await.unwrap());
    }
    assert_eq!(redis_holders(&server, "doc"), 3);
    let tokens: Vec<u64> = guards.iter().map(|g| g.fencing_token()).collect();
    for group in tokens.chunks(5) {
        let rising = group.windows(2).all(|w| w[1] == w[0] + 1);
        assert!(
            rising,
            "members' tokens not the next of their block: {tokens:?}"
        );
    }
    assert!(tokens[5] > tokens[4] + 59, "a new group took no new block");
    let mut guards = guards.into_iter();
    for guard in guards.by_ref().take(4) {
        guard.release().await.unwrap();
    }
    assert_eq!(
        redis_holders(&server, "doc"),
        3,
        "a group's hold went early"
    );
    guards.next().unwrap().release().await.unwrap();
    assert_eq!(redis_holders(&server, "doc"), 2);
    for guard in guards {
        guard.release().await.unwrap();
    }
    assert!(!held_in_redis(&server, "doc"));
}

/// Reads waiting behind another process's write wait in ONE queued request: when the write goes,
/// the leader's grant lets the others in with no call of their own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_waiting_for_a_write_wait_as_one() {
    let server = RedisServer::start();
    let (m, other) = (manager(&server, 8).await, manager(&server, 8).await);
    let write = other.acquire("w", &LockOptions::write()).await.unwrap();
    let reads: Vec<_> = (0..6)
        .map(|_| {
            let m = m.clone();
            tokio::spawn(async move { m.acquire("w", &read()).await })
        })
        .collect();
    // a request counts as waiting before its first call reaches Redis: wait for the leader's too
    let queued = || {
        server
            .cmd(&["LLEN", "{tower-lock:w}:qs"])
            .as_int()
            .unwrap_or(0)
    };
    let all_waiting =
        support::eventually(Duration::from_secs(5), || m.waiting() == 6 && queued() > 0).await;
    assert!(all_waiting, "waiting {}, queued {}", m.waiting(), queued());
    // any other request that went to Redis would be queued by now
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(queued(), 1, "more than the leader queued in Redis");
    write.release().await.unwrap();
    let mut guards = Vec::new();
    for read in reads {
        guards.push(granted(read, "the read").await);
    }
    assert_eq!(redis_holders(&server, "w"), 1);
    drop(guards);
    assert!(support::eventually(Duration::from_secs(5), || !held_in_redis(&server, "w")).await);
}

/// One process reads without pause from 8 tasks; another process's write gets its turn within
/// its wait (the bound closes each group), and never holds while a read does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_of_another_process_gets_its_turn_and_never_overlaps() {
    let server = RedisServer::start();
    let (m, other) = (manager(&server, 8).await, manager(&server, 8).await);
    let (readers, writing, stop) = (
        Arc::new(AtomicI64::new(0)),
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
    );
    let tasks: Vec<_> = (0..8)
        .map(|_| {
            let (m, readers, writing, stop) =
                (m.clone(), readers.clone(), writing.clone(), stop.clone());
            tokio::spawn(async move {
                let mut overlaps = 0;
                while !stop.load(Ordering::SeqCst) {
                    let guard = m.acquire("hot", &read()).await.unwrap();
                    readers.fetch_add(1, Ordering::SeqCst);
                    overlaps += usize::from(writing.load(Ordering::SeqCst));
                    tokio::time::sleep(Duration::from_millis(2)).await;
                    readers.fetch_sub(1, Ordering::SeqCst);
                    guard.release().await.unwrap();
                }
                overlaps
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(200)).await;
    for _ in 0..3 {
        let opts = LockOptions::write().wait_timeout(Duration::from_secs(5));
        let write = other
            .acquire("hot", &opts)
            .await
            .expect("the write's turn came");
        writing.store(true, Ordering::SeqCst);
        assert_eq!(
            readers.load(Ordering::SeqCst),
            0,
            "a read held with the write"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert_eq!(
            readers.load(Ordering::SeqCst),
            0,
            "a read held with the write"
        );
        writing.store(false, Ordering::SeqCst);
        write.release().await.unwrap();
    }
    stop.store(true, Ordering::SeqCst);
    for task in tasks {
        assert_eq!(task.await.unwrap(), 0, "a read held with the write");
    }
}

/// A re-entry of a member joins its own group whatever the bound (else it would queue in Redis
/// behind a write that waits for the member's first read); a write of a member is refused at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_reenters_its_group_and_cannot_upgrade() {
    let server = RedisServer::start();
    let (m, other) = (manager(&server, 1).await, manager(&server, 8).await);
    let owner = m.owner();
    let first = owner.acquire("u", &read()).await.unwrap();
    let second = m.acquire("u", &read()).await.unwrap();
    let write = tokio::spawn({
        let other = other.clone();
        async move { other.acquire("u", &LockOptions::write()).await }
    });
    assert!(support::eventually(Duration::from_secs(5), || other.waiting() == 1).await);
    let opts = read().wait_timeout(Duration::from_secs(2));
    let again = owner
        .acquire("u", &opts)
        .await
        .expect("the re-entry joined");
    assert_eq!(redis_holders(&server, "u"), 1);
    let upgrade = (owner.acquire(
        "u",
        &LockOptions::write().wait_timeout(Duration::from_secs(2)),
    ))
    .await;
    assert!(
        matches!(upgrade, Err(LockError::Unsupported { .. })),
        "{upgrade:?}"
    );
    for guard in [again, second, first] {
        guard.release().await.unwrap();
    }
    let write = granted(write, "the write").await;
    write.release().await.unwrap();
}

/// The group's hold is lost (the lock vanished from Redis): its members learn it, and the next
/// read takes a hold of its own under a new block, which the lost members' releases leave alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_hold_takes_no_new_member() {
    let server = RedisServer::start();
    let m = manager(&server, 8).await;
    let (leader, member) = (
        m.acquire("l", &read()).await.unwrap(),
        m.acquire("l", &read()).await.unwrap(),
    );
    server.cmd(&["DEL", "{tower-lock:l}", "{tower-lock:l}:s"]);
    tokio::time::timeout(Duration::from_secs(3), member.lost())
        .await
        .expect("the renewal finds the hold gone");
    let next = m.acquire("l", &read()).await.unwrap();
    assert!(
        next.fencing_token() > member.fencing_token() + 62,
        "joined a lost hold"
    );
    assert!(!next.is_lost());
    let stale = leader.release().await;
    assert!(matches!(stale, Err(LockError::NotHeld { .. })), "{stale:?}");
    let _ = member.release().await;
    assert_eq!(
        redis_holders(&server, "l"),
        1,
        "a lost member released the new hold"
    );
    next.release().await.unwrap();
    assert!(!held_in_redis(&server, "l"));
}

/// Reads waiting for their leader time out (the lock is written by another process), then the
/// leader's grant comes: it holds alone, and its release frees the lock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_that_leave_a_group_leave_nothing_behind() {
    let server = RedisServer::start();
    let (m, other) = (manager(&server, 8).await, manager(&server, 8).await);
    let write = other.acquire("t", &LockOptions::write()).await.unwrap();
    let leader = tokio::spawn({
        let m = m.clone();
        async move { m.acquire("t", &read()).await }
    });
    assert!(support::eventually(Duration::from_secs(5), || m.waiting() == 1).await);
    let short = read().wait_timeout(Duration::from_millis(100));
    for _ in 0..3 {
        let waited = m.acquire("t", &short).await;
        assert!(
            matches!(waited, Err(LockError::Timeout { .. })),
            "{waited:?}"
        );
    }
    write.release().await.unwrap();
    let leader = tokio::time::timeout(Duration::from_secs(5), leader)
        .await
        .expect("the leader got the lock")
        .unwrap()
        .unwrap();
    assert_eq!(m.waiting(), 0);
    leader.release().await.unwrap();
    assert!(!held_in_redis(&server, "t"));
}

/// The shutdown tells the reads waiting for a leader (`Closed`) and frees the group's hold.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shutdown_closes_the_groups() {
    let server = RedisServer::start();
    let (m, other) = (manager(&server, 8).await, manager(&server, 8).await);
    let member = m.acquire("s", &read()).await.unwrap();
    let joined = m.acquire("s", &read()).await.unwrap();
    let write = other.acquire("s2", &LockOptions::write()).await.unwrap();
    let waiter = tokio::spawn({
        let m = m.clone();
        async move { m.acquire("s2", &read()).await.map(drop) }
    });
    let queued = tokio::spawn({
        let m = m.clone();
        async move {
            tokio::time::sleep(Duration::from_millis(100)).await;
            m.acquire("s2", &read()).await.map(drop)
        }
    });
    assert!(support::eventually(Duration::from_secs(5), || m.waiting() == 2).await);
    m.shutdown().await.unwrap();
    for task in [waiter, queued] {
        let waited = tokio::time::timeout(Duration::from_secs(5), task)
            .await
            .expect("the waiting read was told")
            .unwrap();
        assert!(matches!(waited, Err(LockError::Closed)), "{waited:?}");
    }
    assert!(member.is_lost() && joined.is_lost());
    assert!(!held_in_redis(&server, "s"));
    write.release().await.unwrap();
}

/// Redis restarts empty while a group holds a read, and another process writes the lock at
/// once: a new read of the group's process must not join the forgotten hold; it waits for the
/// write.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hold_a_restart_may_have_forgotten_takes_no_new_member() {
    let mut server = RedisServer::start();
    // a long lease: no renewal finds the hold gone while the test runs
    let m = manager_with_lease(&server, 8, Duration::from_secs(30)).await;
    let other = manager(&server, 8).await;
    let held = m.acquire("r", &read()).await.unwrap();
    server.restart();
    let mut taken = None;
    for _ in 0..100 {
        if let Ok(Some(guard)) = other.try_acquire("r", &LockOptions::write()).await {
            taken = Some(guard);
            break;
        }
    }
    let taken = taken.expect("the other process wrote the forgotten lock");
    // the manager learns of the restart by now (and its renewal that the hold is gone)
    tokio::time::sleep(Duration::from_millis(200)).await;
    let next = tokio::spawn({
        let m = m.clone();
        async move { m.acquire("r", &read()).await }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !next.is_finished(),
        "a read joined a forgotten hold beside a write"
    );
    let token = taken.fencing_token();
    taken.release().await.unwrap();
    let next = granted(next, "the read").await;
    assert!(next.fencing_token() > token);
    drop(held);
    next.release().await.unwrap();
}

/// Redis goes away while a group holds a read: once the manager has seen its connection drop, a
/// new read does not join a hold that nobody can vouch for; it asks Redis, and learns that Redis
/// is unreachable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hold_whose_server_went_away_takes_no_new_member() {
    let mut server = RedisServer::start();
    let m = manager_with_lease(&server, 8, Duration::from_secs(30)).await;
    let held = m.acquire("k", &read()).await.unwrap();
    server.kill();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let opts = read().wait_timeout(Duration::from_secs(2));
    let next = m.acquire("k", &opts).await;
    assert!(
        matches!(next, Err(LockError::Unavailable { .. })),
        "{next:?}"
    );
    drop(held);
}

/// A member's re-entry with a fixed lease (not a read that would join a group by itself) joins its
/// group at once, though a write of another process waits; its guard is lost when its own lease
/// ends, the group's hold staying.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_members_fixed_lease_reentry_joins_its_group() {
    let server = RedisServer::start();
    let (m, other) = (manager(&server, 8).await, manager(&server, 8).await);
    let owner = m.owner();
    let first = owner.acquire("f", &read()).await.unwrap();
    let write = tokio::spawn({
        let other = other.clone();
        async move { other.acquire("f", &LockOptions::write()).await }
    });
    assert!(support::eventually(Duration::from_secs(5), || other.waiting() == 1).await);
    let fixed = LockOptions::read()
        .lease(Duration::from_millis(300))
        .wait_timeout(Duration::from_secs(2));
    let again = owner
        .acquire("f", &fixed)
        .await
        .expect("the re-entry joined");
    assert_eq!(redis_holders(&server, "f"), 1);
    tokio::time::timeout(Duration::from_secs(2), again.lost())
        .await
        .expect("the re-entry's own lease ended");
    assert!(
        !first.is_lost(),
        "the group's hold went with the re-entry's lease"
    );
    drop(again);
    first.release().await.unwrap();
    let write = granted(write, "the write").await;
    write.release().await.unwrap();
}
