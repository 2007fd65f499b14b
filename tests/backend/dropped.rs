//! A dropped guard's release on a real redis-server: the drop itself writes it, with no task of
//! the runtime between the drop and Redis, and what its answer asks for still gets done.

use std::sync::Mutex;
use std::time::Duration;

use tower_lock::{LockGuard, LockManager, LockOptions};

use crate::support::logs::{self, Warnings};
use crate::support::proxy::Proxy;
use crate::support::{eventually, wait_until, RedisServer, GENEROUS};

/// Redis's name of the lock `key`.
fn redis_key(key: &str) -> String {
    format!("{{tower-lock:{key}}}")
}

/// Whether Redis answers `command` with `answer` within [`GENEROUS`], asked again and again.
async fn answers(server: &RedisServer, command: &[&str], answer: i64) -> bool {
    eventually(GENEROUS, || server.cmd(command).as_int() == Some(answer)).await
}

/// Whether a failed release is logged in `warnings` within `within`.
async fn logged_a_failed_release(warnings: &Mutex<Vec<String>>, within: Duration) -> bool {
    eventually(within, || {
        let lines = warnings.lock().unwrap_or_else(|p| p.into_inner());
        lines.iter().any(|line| line.contains("release failed"))
    })
    .await
}

/// Drop `guard`, then wait for Redis to see its lock free while blocking the thread: on a
/// current-thread runtime no task runs meanwhile, so only the drop itself can have released it.
fn freed_by_the_drop(server: &RedisServer, guard: LockGuard) -> bool {
    let key = redis_key(guard.key());
    drop(guard);
    wait_until(Duration::from_secs(2), || {
        server.cmd(&["EXISTS", &key]).as_int() == Some(0)
    })
}

#[tokio::test(flavor = "current_thread")]
async fn a_dropped_guard_is_released_by_the_drop_itself() {
    let server = RedisServer::start();
    let manager = LockManager::redis(&server.url()).await.expect("manager");
    for opts in [LockOptions::exclusive(), LockOptions::fair()] {
        let guard = manager.acquire("plain", &opts).await.expect("acquire");
        assert_eq!(
            server.cmd(&["TYPE", &redis_key("plain")]).as_string(),
            Some("string".to_owned()),
            "taken on the plain path"
        );
        assert!(freed_by_the_drop(&server, guard), "{opts:?}");
    }
}

#[tokio::test(flavor = "current_thread")]
async fn a_dropped_guard_of_a_lock_taken_by_script_is_released_by_the_drop_itself() {
    let server = RedisServer::start();
    let (holder, waiter) = (
        LockManager::redis(&server.url()).await.expect("manager"),
        LockManager::redis(&server.url()).await.expect("manager"),
    );
    let opts = LockOptions::exclusive().wait_timeout(GENEROUS);
    let held = holder.acquire("scripted", &opts).await.expect("acquire");
    let waiting = tokio::spawn(async move {
        let guard = waiter.acquire("scripted", &opts).await;
        (waiter, guard)
    });
    // the waiter's first attempt finds the lock busy; its next one runs the script
    let waiters = redis_key("scripted") + ":w";
    let recorded = answers(&server, &["EXISTS", &waiters], 1).await;
    assert!(recorded, "the waiter was recorded");
    held.release().await.expect("release");
    let (_waiter, guard) = waiting.await.expect("waiting task");
    let guard = guard.expect("acquire after the release");
    assert_eq!(
        server.cmd(&["TYPE", &redis_key("scripted")]).as_string(),
        Some("hash".to_owned()),
        "taken by the script"
    );
    assert!(freed_by_the_drop(&server, guard));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_guard_is_released_after_the_server_lost_its_scripts() {
    let server = RedisServer::start();
    let manager = LockManager::redis(&server.url()).await.expect("manager");
    let guard = manager
        .acquire("flushed", &LockOptions::exclusive())
        .await
        .expect("acquire");
    let loads = server.command_calls("script|load");
    server.cmd(&["SCRIPT", "FLUSH"]);
    drop(guard);
    let key = redis_key("flushed");
    let freed = answers(&server, &["EXISTS", &key], 0).await;
    assert!(freed, "the release ran again once its script was loaded");
    assert!(server.command_calls("script|load") > loads);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_guard_hands_its_lock_to_a_waiter_of_its_own_process() {
    let server = RedisServer::start();
    // without cohorts, a waiter of the same process queues in Redis, and the release's answer
    // carries its grant
    let builder = LockManager::builder().redis(server.url()).local_handoffs(0);
    let manager = builder.build().await.expect("manager");
    let opts = LockOptions::fair().wait_timeout(GENEROUS);
    let held = manager.acquire("handed", &opts).await.expect("acquire");
    let token = held.fencing_token();
    let next = {
        let manager = manager.clone();
        tokio::spawn(async move { manager.acquire("handed", &opts).await })
    };
    let queue = redis_key("handed") + ":ql";
    let queued = answers(&server, &["LLEN", &queue], 1).await;
    assert!(queued, "the second request queued");
    let publishes = server.command_calls("publish");
    drop(held);
    let next = next.await.expect("waiting task").expect("acquire");
    assert!(next.fencing_token() > token);
    assert_eq!(
        server.command_calls("publish"),
        publishes,
        "the grant came in the release's answer, not by message"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn a_dropped_guard_whose_connection_died_is_logged_and_the_next_command_reconnects() {
    // the link's reader settles the release on this thread: its warning is seen here
    let (subscriber, warnings) = Warnings::new();
    let _logs = logs::set_thread_default(subscriber);
    let server = RedisServer::start();
    let manager = LockManager::redis(&server.url()).await.expect("manager");
    let guard = manager
        .acquire("killed", &LockOptions::exclusive())
        .await
        .expect("acquire");
    let killed = server.cmd(&["CLIENT", "KILL", "TYPE", "normal"]).as_int();
    assert!(killed >= Some(1), "the command connection was killed");
    // whether the link learns of the close before the release or from it, the release fails
    // (the lease, 30 s, needs no renewal meanwhile)
    drop(guard);
    let warned = logged_a_failed_release(&warnings, GENEROUS).await;
    assert!(warned, "the failed release was logged");
    // the lock runs out with its lease; the next command goes on a fresh connection
    let ttl = server.cmd(&["PTTL", &redis_key("killed")]).as_int();
    assert!(ttl.is_some_and(|ms| ms > 0), "still held: {ttl:?}");
    let other = manager
        .try_acquire("other", &LockOptions::exclusive())
        .await
        .expect("a command after the failed release");
    assert!(other.is_some());
}

#[tokio::test(flavor = "current_thread")]
async fn a_shutdown_finishes_the_release_of_a_dropped_guard_whose_script_was_lost() {
    let server = RedisServer::start();
    let manager = LockManager::redis(&server.url()).await.expect("manager");
    let guard = manager
        .acquire("flushed-at-shutdown", &LockOptions::exclusive())
        .await
        .expect("acquire");
    server.cmd(&["SCRIPT", "FLUSH"]);
    // the release goes out with the drop; its answer (NOSCRIPT) comes while the shutdown waits,
    // and asks the background task to make the call again
    drop(guard);
    tokio::time::timeout(GENEROUS, manager.shutdown())
        .await
        .expect("the shutdown ends")
        .expect("shutdown");
    let key = redis_key("flushed-at-shutdown");
    assert_eq!(
        server.cmd(&["EXISTS", &key]).as_int(),
        Some(0),
        "the shutdown freed the lock"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn a_dropped_guards_release_unanswered_within_the_command_timeout_gives_up() {
    // the link's reader settles the release on this thread: its warning is seen here
    let (subscriber, warnings) = Warnings::new();
    let _logs = logs::set_thread_default(subscriber);
    let server = RedisServer::start();
    let proxy = Proxy::start(server.port());
    let manager = LockManager::builder()
        .redis(proxy.url())
        .command_timeout(Duration::from_millis(300))
        .build()
        .await
        .expect("manager");
    let guard = manager
        .acquire("unanswered", &LockOptions::exclusive())
        .await
        .expect("acquire");
    proxy.blackhole();
    drop(guard);
    // no answer comes while the network drops everything: the release gives up at its timeout,
    // as a caller's timer would, and marks its connection broken
    let warned = logged_a_failed_release(&warnings, Duration::from_secs(3)).await;
    assert!(warned, "the release gave up within the command timeout");
    proxy.heal();
    let other = manager
        .try_acquire("other", &LockOptions::exclusive())
        .await
        .expect("a command after the release gave up");
    assert!(other.is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_timeout_too_long_to_count_never_times_out_a_release_or_a_wait() {
    let server = RedisServer::start();
    // `Duration::MAX`: commands never time out; deadlines that overflow are none, not a panic
    let builder = LockManager::builder()
        .redis(server.url())
        .command_timeout(Duration::MAX)
        .local_handoffs(0);
    let manager = builder.build().await.expect("manager");
    let opts = LockOptions::fair().wait_timeout(GENEROUS);
    let held = manager.acquire("forever", &opts).await.expect("acquire");
    // without cohorts, the second request queues in Redis by script
    let next = {
        let manager = manager.clone();
        tokio::spawn(async move { manager.acquire("forever", &opts).await })
    };
    let queue = redis_key("forever") + ":ql";
    assert!(answers(&server, &["LLEN", &queue], 1).await, "queued");
    drop(held);
    let next = next.await.expect("the waiting task").expect("acquire");
    let key = redis_key("forever");
    drop(next);
    assert!(answers(&server, &["EXISTS", &key], 0).await, "released");
}
