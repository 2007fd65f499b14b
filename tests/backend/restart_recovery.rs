//! No spurious error once Redis is back: a command connection the server closed (a restart, a
//! `CLIENT KILL`) is found closed by its reader as it happens, and the next command goes out on a
//! fresh connection instead of failing on the dead one ("broken pipe").

use std::time::{Duration, Instant};

use tokio::task::JoinSet;
use tower_lock::{LockManager, LockOptions};

use crate::support::{RedisServer, GENEROUS};

/// Requests per manager after the restart, as the issue sent them on each of two replicas.
const REQUESTS: usize = 50;

async fn manager(server: &RedisServer, pool_size: u32) -> LockManager {
    LockManager::builder()
        .redis(server.url())
        .pool_size(pool_size)
        .lease(Duration::from_secs(30))
        .build()
        .await
        .expect("manager")
}

/// `REQUESTS` requests on `m` at once, over ten accounts (so some wait for others), each holding
/// its lock briefly; half release by dropping the guard (a release from `Drop`), half with
/// `release()`. The errors, as text.
async fn requests(m: &LockManager, name: &str) -> Vec<String> {
    let mut tasks = JoinSet::new();
    for i in 0..REQUESTS {
        let (m, key) = (m.clone(), format!("accounts/{}", i % 10));
        let opts = LockOptions::exclusive().wait_timeout(Duration::from_secs(10));
        tasks.spawn(async move {
            let guard = m.acquire(&key, &opts).await.map_err(|e| e.to_string())?;
            tokio::time::sleep(Duration::from_millis(2)).await;
            if i % 2 == 0 {
                drop(guard);
                return Ok(());
            }
            guard.release().await.map_err(|e| e.to_string())
        });
    }
    let outcomes = tasks.join_all().await;
    let errors = outcomes.into_iter().filter_map(Result::err);
    errors.map(|e| format!("{name}: {e}")).collect()
}

/// The trial: Redis restarts (same port, empty), and a second later each of two replicas
/// gets 50 requests. Every one succeeds: before, each replica's first request on each command
/// connection failed with "broken pipe", however long after the restart it came. One manager
/// has three command connections (each would have failed once).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_a_second_after_a_restart_all_succeed_on_two_managers() {
    let mut server = RedisServer::start();
    let replicas = [manager(&server, 1).await, manager(&server, 3).await];
    for m in &replicas {
        // every command connection has carried commands before the restart
        assert!(requests(m, "warm-up").await.is_empty());
    }
    server.restart();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let (first, second) = tokio::join!(
        requests(&replicas[0], "replica 1"),
        requests(&replicas[1], "replica 2")
    );
    let errors: Vec<String> = first.into_iter().chain(second).collect();
    assert!(errors.is_empty(), "{} errors: {errors:#?}", errors.len());
}

/// A lock held while its command connection is killed (`CLIENT KILL`: the server keeps the lock)
/// is released on a fresh connection, by `release()` and by a dropped guard alike, in every
/// mode: before, the release failed on the closed connection and the lock stayed held until its
/// 30 s lease ran out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_after_the_connection_was_killed_goes_out_on_a_fresh_one() {
    let server = RedisServer::start();
    let m = manager(&server, 1).await;
    let other = manager(&server, 1).await;
    let modes = [
        ("exclusive", LockOptions::exclusive()),
        ("fair", LockOptions::fair()),
        ("write", LockOptions::write()),
        ("semaphore", LockOptions::semaphore(1)),
    ];
    for (name, opts) in modes {
        for dropped in [false, true] {
            let key = format!("{name}-{dropped}");
            let guard = m.acquire(&key, &opts).await.expect("acquire");
            let killed = server.cmd(&["CLIENT", "KILL", "TYPE", "normal"]).as_int();
            assert!(killed >= Some(1), "a command connection was killed");
            // the link reads the close now; the release comes later
            tokio::time::sleep(Duration::from_millis(100)).await;
            if dropped {
                drop(guard);
            } else {
                let released = guard.release().await;
                assert!(released.is_ok(), "{key}: {released:?}");
            }
            let since = Instant::now();
            let free = loop {
                match other.try_acquire(&key, &opts).await {
                    Ok(Some(free)) => break free,
                    Ok(None) if since.elapsed() < GENEROUS => {
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                    outcome => panic!("{key}: still held after {:?}: {outcome:?}", since.elapsed()),
                }
            };
            assert!(
                since.elapsed() < Duration::from_secs(5),
                "{key}: free only after {:?}",
                since.elapsed()
            );
            free.release().await.expect("release");
        }
    }
}
