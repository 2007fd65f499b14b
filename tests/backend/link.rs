//! The command connection of the crate's own pool, against a real server: answers reach their
//! callers when the commands outgrow the socket's buffers, a connection Redis closes is replaced
//! before the next command is sent on it, a dropped guard's release on a busy link goes out with the
//! next command, and the URL's password and database are used.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::task::JoinSet;
use tower_lock::key::MAX_KEY_LEN;
use tower_lock::{LockManager, LockOptions};

use crate::support::{RedisServer, GENEROUS};

/// Locks whose commands (about 700 bytes each, with the longest names, which Redis keys cut to a
/// hash) outgrow what the kernel buffers between the process and a frozen server (4 MB to send on
/// this machine, and the server's receive window).
const LOCKS: usize = 20_000;

fn long_name(i: usize) -> String {
    format!("{i:05}{}", "x".repeat(MAX_KEY_LEN - 5))
}

async fn manager(url: &str) -> LockManager {
    // long enough that no command times out while the server is frozen
    let timeout = Duration::from_secs(60);
    let builder = LockManager::builder().redis(url).command_timeout(timeout);
    builder.build().await.expect("manager")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_reach_their_callers_when_commands_outgrow_the_socket() {
    let server = RedisServer::start();
    // its 6,667 holds go out at once: on a loaded machine they take longer than the default
    // command timeout, which is not what this test is about
    let other = manager(&server.url()).await;
    let manager = manager(&server.url()).await;
    let opts = LockOptions::exclusive();
    // every third lock is held elsewhere: its try must say so, and the others must take theirs
    let mut holds = JoinSet::new();
    for i in (0..LOCKS).step_by(3) {
        let other = other.clone();
        holds.spawn(async move { other.acquire(&long_name(i), &opts).await.expect("held") });
    }
    let held_elsewhere = holds.join_all().await;
    // the command connection is open before the server freezes (opening it needs answers)
    let warm = manager.acquire("warm-up", &opts).await.expect("warm-up");
    warm.release().await.expect("release");

    server.stop_process();
    let started = Arc::new(AtomicUsize::new(0));
    let mut tries = JoinSet::new();
    for i in 0..LOCKS {
        let (manager, started) = (manager.clone(), started.clone());
        tries.spawn(async move {
            started.fetch_add(1, Ordering::Relaxed);
            (i, manager.try_acquire(&long_name(i), &opts).await)
        });
    }
    // every try has started, and its commands go in its first poll: the socket fills, and the
    // rest waits in the process (10,000 of the tries find bytes still waiting)
    while started.load(Ordering::Relaxed) < LOCKS {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    server.continue_process();

    let mut taken = Vec::new();
    let answered = tokio::time::timeout(GENEROUS * 3, async {
        while let Some(joined) = tries.join_next().await {
            let (i, outcome) = joined.expect("try task");
            let guard = outcome.unwrap_or_else(|err| panic!("lock {i}: {err}"));
            assert_eq!(guard.is_some(), i % 3 != 0, "lock {i}");
            taken.extend(guard);
        }
    });
    answered
        .await
        .expect("every try answered once the server resumed");
    assert_eq!(taken.len() + held_elsewhere.len(), LOCKS);
    assert!(taken.iter().all(|guard| guard.fencing_token() > 0));
    // the locks are really held: the other manager finds them taken
    let probe = other
        .try_acquire(&long_name(1), &opts)
        .await
        .expect("probe");
    assert!(probe.is_none(), "lock 1 is held");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_redis_closes_is_replaced_before_the_next_command() {
    let server = RedisServer::start();
    let manager = manager(&server.url()).await;
    let opts = LockOptions::exclusive();
    let guard = manager.acquire("account:42", &opts).await.expect("acquire");
    guard.release().await.expect("release");

    let killed = server.cmd(&["CLIENT", "KILL", "TYPE", "normal"]).as_int();
    assert!(
        killed >= Some(1),
        "the command connection was killed: {killed:?}"
    );
    // the link reads the close before the next command, which then takes a fresh connection
    tokio::time::sleep(Duration::from_millis(100)).await;

    let tried = Instant::now();
    let outcome = manager.try_acquire("account:42", &opts).await;
    // far below the command timeout: the closed connection was noticed, not waited out
    assert!(
        tried.elapsed() < Duration::from_secs(2),
        "{:?}",
        tried.elapsed()
    );
    let guard = match outcome {
        Ok(Some(guard)) => guard,
        other => panic!("the first command after the close failed: {other:?}"),
    };
    guard
        .release()
        .await
        .expect("release on the new connection");
}

/// A release from `Drop` on a busy link is left for the reader task, which writes it once the
/// tasks ready to run have had their turn: an acquire such a task makes goes out in the same
/// write, which the server reads once. Before, the reader wrote the release alone first.
#[tokio::test(flavor = "current_thread")]
async fn a_release_on_a_busy_link_goes_out_with_the_next_command() {
    let server = RedisServer::start();
    // one connection: every lock's commands go on it
    let builder = LockManager::builder().redis(server.url()).pool_size(1);
    let manager = builder.build().await.expect("manager");
    let opts = LockOptions::exclusive();
    let first = manager.acquire("account:1", &opts).await.expect("first");
    let second = manager.acquire("account:2", &opts).await.expect("second");
    // what reading the count costs (the support opens a connection for each command)
    let idle = server.total_reads();
    let counting = server.total_reads() - idle;
    let before = server.total_reads();

    // the first release goes at once, on an idle link; the second finds it busy
    drop(first);
    drop(second);
    let third = tokio::spawn({
        let manager = manager.clone();
        async move { manager.acquire("account:3", &opts).await.expect("third") }
    });
    let third = third.await.expect("third's task");
    let after = server.total_reads();
    assert!(
        after - before - counting <= 2,
        "the second release went out alone: {} reads",
        after - before - counting
    );
    for (name, held) in [("account%3A1", 0), ("account%3A2", 0), ("account%3A3", 1)] {
        let key = format!("{{tower-lock:{name}}}");
        assert_eq!(server.cmd(&["EXISTS", &key]).as_int(), Some(held), "{name}");
    }
    third.release().await.expect("release");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_urls_password_and_database_reach_the_command_connection() {
    let server = RedisServer::start();
    let set = server.cmd(&["ACL", "SETUSER", "default", "resetpass", ">s3cret"]);
    assert!(set.as_string().is_some_and(|ok| ok == "OK"), "{set:?}");
    let url = |db: u8| format!("redis://:s3cret@127.0.0.1:{}/{db}", server.port());
    let opts = LockOptions::exclusive();

    let in_3 = LockManager::redis(&url(3))
        .await
        .expect("manager on database 3");
    let _held = in_3.acquire("account:42", &opts).await.expect("acquire");
    let again = LockManager::redis(&url(3)).await.expect("second manager");
    let probe = again.try_acquire("account:42", &opts).await.expect("try");
    assert!(probe.is_none(), "database 3 holds the lock");
    let in_0 = LockManager::redis(&url(0))
        .await
        .expect("manager on database 0");
    let other = in_0.try_acquire("account:42", &opts).await.expect("try");
    assert!(other.is_some(), "database 0 has locks of its own");

    let wrong = format!("redis://:wrong@127.0.0.1:{}/3", server.port());
    let refused = LockManager::redis(&wrong).await;
    assert!(refused.is_err(), "a wrong password is refused");
}
