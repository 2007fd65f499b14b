//! A manager on a bb8 pool the user built (`LockManagerBuilder::redis_pool`): its connections have
//! not loaded our scripts, and its commands go straight to them, without our command batcher.

use std::time::Duration;

use tower_lock::{LockManager, LockOptions, RedisPool};

use crate::support;
use crate::support::RedisServer;

async fn user_pool(server: &RedisServer) -> RedisPool {
    let manager = bb8_redis::RedisConnectionManager::new(server.url()).expect("connection manager");
    bb8::Pool::builder()
        .max_size(4)
        .test_on_check_out(false)
        .build(manager)
        .await
        .expect("pool")
}

async fn manager(server: &RedisServer) -> LockManager {
    LockManager::builder()
        .redis_pool(user_pool(server).await, server.url())
        .lease(Duration::from_secs(30))
        .build()
        .await
        .expect("manager on a user's pool")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn locks_work_through_a_pool_the_user_built() {
    let server = RedisServer::start();
    let (first, second) = (manager(&server).await, manager(&server).await);
    for opts in [LockOptions::exclusive(), LockOptions::fair()] {
        // the pool's connections never loaded the scripts: the first call of each loads it
        let held = first.acquire("account:42", &opts).await.expect("acquire");
        assert!(held.fencing_token() > 0);
        let busy = second.try_acquire("account:42", &opts).await.expect("try");
        assert!(busy.is_none(), "held by the first manager");

        // a waiter of the other manager gets the lock when it is released
        let waiter = {
            let second = second.clone();
            tokio::spawn(async move { second.acquire("account:42", &opts).await })
        };
        let queued = support::eventually(Duration::from_secs(5), || second.waiting() == 1).await;
        assert!(queued, "the waiter never started waiting");
        let token = held.fencing_token();
        held.release().await.expect("release");
        let next = tokio::time::timeout(Duration::from_secs(5), waiter)
            .await
            .expect("the waiter was told")
            .expect("waiter task")
            .expect("acquire after release");
        assert!(next.fencing_token() > token);
        next.release().await.expect("release");
    }
    assert!(server.command_calls("script|load") > 0);
}

/// A user's pool with no connection to spare: bb8 would wait 30 s for one by default. The command
/// timeout bounds every call, getting a connection included: an acquire and a release fail with
/// `Unavailable` in about that long. A full pool is busy, not broken: waiting for it opens no
/// connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exhausted_user_pool_fails_within_the_command_timeout() {
    let server = RedisServer::start();
    let manager = bb8_redis::RedisConnectionManager::new(server.url()).expect("connection manager");
    let pool = bb8::Pool::builder()
        .max_size(1)
        .build(manager)
        .await
        .expect("pool");
    let m = LockManager::builder()
        .redis_pool(pool.clone(), server.url())
        .command_timeout(Duration::from_millis(300))
        .build()
        .await
        .expect("manager on a user's pool");
    let held = m.acquire("k", &LockOptions::exclusive()).await.unwrap();
    let taken = pool.get().await.expect("the pool's one connection");
    // each INFO comes on a connection of its own
    let connections_received = || {
        let stats = server.info("stats");
        let field = stats
            .lines()
            .find_map(|l| l.strip_prefix("total_connections_received:"))
            .expect("total_connections_received");
        field.trim().parse::<u64>().expect("a count")
    };
    let received_before = connections_received();
    let bounded = |call: &str, took: Duration, outcome: &Result<(), tower_lock::LockError>| {
        assert!(
            matches!(outcome, Err(tower_lock::LockError::Unavailable { .. })),
            "{call}: {outcome:?}"
        );
        assert!(
            took < Duration::from_secs(2),
            "{call} waited {took:?} for a connection"
        );
    };
    let started = std::time::Instant::now();
    let outcome = m
        .acquire("other", &LockOptions::exclusive())
        .await
        .map(drop);
    bounded("acquire", started.elapsed(), &outcome);
    let opened = connections_received() - received_before - 1;
    assert_eq!(opened, 0, "waiting for a full pool opened connections");
    let started = std::time::Instant::now();
    let outcome = held.release().await;
    bounded("release", started.elapsed(), &outcome);
    drop(taken);
}

/// Redis killed under a user's pool (bb8 defaults: a PING on check-out, and connections retried
/// in a task of bb8's own for its whole connection timeout): from the first call on, every call
/// fails at once saying the connection was refused. The first one finds the pool's idle connection
/// dead, and bb8 would keep it waiting for the retried one; the call asks Redis itself instead of
/// waiting out the command timeout for "no Redis connection".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_connection_fails_calls_on_a_user_pool_at_once() {
    let mut server = RedisServer::start();
    let manager = bb8_redis::RedisConnectionManager::new(server.url()).expect("connection manager");
    let pool = bb8::Pool::builder()
        .max_size(2)
        .build(manager)
        .await
        .expect("pool");
    let m = LockManager::builder()
        .redis_pool(pool.clone(), server.url())
        .command_timeout(Duration::from_secs(2))
        .build()
        .await
        .expect("manager on a user's pool");
    let held = m.acquire("k", &LockOptions::exclusive()).await.unwrap();
    held.release().await.expect("release");
    assert_eq!(pool.state().idle_connections, 1, "{:?}", pool.state());
    server.kill();
    for call in 0..3 {
        let started = std::time::Instant::now();
        let err = m
            .try_acquire("k", &LockOptions::exclusive())
            .await
            .unwrap_err();
        let took = started.elapsed();
        assert!(err.is_unavailable(), "call {call}: {err:?}");
        let cause = err.to_string().to_lowercase();
        assert!(
            cause.contains("refused"),
            "call {call} hides the cause: {err}"
        );
        assert!(
            took < Duration::from_secs(1),
            "call {call} took {took:?}: {err}"
        );
    }
}
