//! Real faults against real redis-server processes: deleted locks, dead and frozen servers, a killed
//! pub/sub connection.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tower_lock::{LockError, LockManager, LockOptions};

use crate::support;
use crate::support::RedisServer;

async fn manager_with_lease(server: &RedisServer, lease: Duration) -> LockManager {
    LockManager::builder()
        .redis(server.url())
        .lease(lease)
        .command_timeout(Duration::from_millis(500))
        .build()
        .await
        .expect("manager")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_fires_when_the_lock_is_deleted_behind_the_holder() {
    let server = RedisServer::start();
    let m = manager_with_lease(&server, Duration::from_millis(600)).await;
    let guard = m
        .acquire("victim", &LockOptions::exclusive())
        .await
        .unwrap();
    assert!(!guard.is_lost());
    server.cmd(&["DEL", "{tower-lock:victim}"]);
    tokio::time::timeout(Duration::from_secs(3), guard.lost())
        .await
        .expect("lost() fires at the next renewal");
    assert!(guard.is_lost());
    assert_eq!(m.held(), 0, "a lost lease is not renewed any more");
    let err = guard.release().await.unwrap_err();
    assert!(
        matches!(err, LockError::NotHeld { ref key } if key == "victim"),
        "{err:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watchdog_keeps_leases_alive_and_stops_after_release() {
    let server = RedisServer::start();
    let lease = Duration::from_millis(300);
    let m = manager_with_lease(&server, lease).await;
    let other = manager_with_lease(&server, lease).await;
    let guards = futures_join(&m, 200).await;
    tokio::time::sleep(lease * 4).await; // several lease periods: only renewal keeps them
    for g in &guards {
        assert!(!g.is_lost());
    }
    assert!(other
        .try_acquire("many:7", &LockOptions::exclusive())
        .await
        .unwrap()
        .is_none());
    // 200 leases, batched: a handful of script calls per period, not 200
    let before = server.command_calls("evalsha");
    tokio::time::sleep(lease).await;
    let per_period = server.command_calls("evalsha") - before;
    assert!(
        per_period <= 4,
        "{per_period} renewal calls in one lease period for 200 locks"
    );
    drop(guards);
    let released = support::eventually(Duration::from_secs(5), || {
        server
            .cmd(&["KEYS", "{tower-lock:many*}"])
            .as_array()
            .map_or(0, |k| k.len())
            == 0
    })
    .await;
    assert!(released, "dropped guards are released in the background");
    assert_eq!(m.held(), 0);
    let before = server.command_calls("evalsha");
    tokio::time::sleep(lease * 2).await;
    assert_eq!(
        server.command_calls("evalsha"),
        before,
        "nothing renewed after release"
    );
}

async fn futures_join(m: &LockManager, n: usize) -> Vec<tower_lock::LockGuard> {
    let mut guards = Vec::new();
    for i in 0..n {
        guards.push(
            m.acquire(&format!("many:{i}"), &LockOptions::exclusive())
                .await
                .unwrap(),
        );
    }
    guards
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lease_is_lost_when_redis_is_gone_for_a_whole_lease() {
    let mut server = RedisServer::start();
    let m = manager_with_lease(&server, Duration::from_millis(600)).await;
    let guard = m.acquire("gone", &LockOptions::exclusive()).await.unwrap();
    server.kill();
    let started = Instant::now();
    tokio::time::timeout(Duration::from_secs(5), guard.lost())
        .await
        .expect("lost() fires once a whole lease passed without renewal");
    assert!(started.elapsed() >= Duration::from_millis(300));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_down_is_an_error_not_a_hang_and_recovers_after_restart() {
    let mut server = RedisServer::start();
    let m = manager_with_lease(&server, Duration::from_secs(5)).await;
    m.acquire("up", &LockOptions::exclusive())
        .await
        .unwrap()
        .release()
        .await
        .unwrap();
    server.kill();
    let started = Instant::now();
    let err = m
        .acquire("up", &LockOptions::exclusive())
        .await
        .unwrap_err();
    assert!(err.is_unavailable(), "{err:?}");
    assert_eq!(err.key(), Some("up"));
    let err = m
        .try_acquire("up", &LockOptions::exclusive())
        .await
        .unwrap_err();
    assert!(
        err.is_unavailable(),
        "try_acquire must not say 'busy' when Redis is down: {err:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "took {:?}",
        started.elapsed()
    );

    server.restart();
    let recovered = async {
        loop {
            match m.try_acquire("up", &LockOptions::exclusive()).await {
                Ok(Some(g)) => return g,
                _ => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        }
    };
    let g = tokio::time::timeout(Duration::from_secs(10), recovered)
        .await
        .expect("recovers");
    g.release().await.unwrap();
}

/// The lock `key` once `m` can take it without waiting, trying every 20 ms for at most `within`.
async fn once_free(
    m: &LockManager,
    key: &str,
    within: Duration,
) -> Result<tower_lock::LockGuard, tokio::time::error::Elapsed> {
    tokio::time::timeout(within, async {
        loop {
            if let Ok(Some(g)) = m.try_acquire(key, &LockOptions::exclusive()).await {
                return g;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn frozen_redis_fails_within_the_command_timeout() {
    let server = RedisServer::start();
    let m = manager_with_lease(&server, Duration::from_secs(5)).await;
    m.acquire("ice", &LockOptions::exclusive())
        .await
        .unwrap()
        .release()
        .await
        .unwrap();
    server.stop_process();
    let started = Instant::now();
    let err = m
        .acquire("ice", &LockOptions::exclusive())
        .await
        .unwrap_err();
    let elapsed = started.elapsed();
    server.continue_process();
    assert!(err.is_unavailable(), "{err:?}");
    assert!(elapsed < Duration::from_secs(3), "took {elapsed:?}");
    // a wait timeout shorter than the command timeout is honoured too, and the frozen server is
    // still the cause: Unavailable, not Timeout (no one said the lock was busy)
    server.stop_process();
    let started = Instant::now();
    let opts = LockOptions::exclusive().wait_timeout(Duration::from_millis(100));
    let err = m.acquire("ice", &opts).await.unwrap_err();
    let elapsed = started.elapsed();
    server.continue_process();
    assert!(err.is_unavailable(), "{err:?}");
    assert!(elapsed < Duration::from_millis(400), "took {elapsed:?}");
    let g = once_free(&m, "ice", Duration::from_secs(5))
        .await
        .expect("works again after SIGCONT");
    drop(g);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_survive_a_killed_pubsub_connection() {
    let server = RedisServer::start();
    let holder = manager_with_lease(&server, Duration::from_secs(30)).await;
    let m = manager_with_lease(&server, Duration::from_secs(30)).await;
    let held = holder
        .acquire("hot", &LockOptions::exclusive())
        .await
        .unwrap();
    let acquired = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for _ in 0..100 {
        let (m, acquired) = (m.clone(), acquired.clone());
        tasks.push(tokio::spawn(async move {
            let opts = LockOptions::exclusive().wait_timeout(Duration::from_secs(20));
            let g = m
                .acquire("hot", &opts)
                .await
                .expect("acquire after the inbox came back");
            acquired.fetch_add(1, Ordering::SeqCst);
            g.release().await.unwrap();
        }));
    }
    let all_waiting = support::eventually(Duration::from_secs(10), || m.waiting() == 100).await;
    assert!(all_waiting);
    assert!(server.client_kill_pubsub() >= 1);
    held.release().await.unwrap();
    let started = Instant::now();
    for t in tasks {
        t.await.unwrap();
    }
    assert_eq!(acquired.load(Ordering::SeqCst), 100);
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "waiters slept until expiry"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_fail_promptly_when_redis_dies() {
    // a 30 s lease: a waiter that slept out the holder's lease would take that long
    let mut server = RedisServer::start();
    let holder = manager_with_lease(&server, Duration::from_secs(30)).await;
    let m = manager_with_lease(&server, Duration::from_secs(30)).await;
    let _held = holder
        .acquire("doomed", &LockOptions::exclusive())
        .await
        .unwrap();
    let _held_fair = holder
        .acquire("doomed-fair", &LockOptions::fair())
        .await
        .unwrap();
    let mut waiting = Vec::new();
    for (key, opts) in [
        ("doomed", LockOptions::exclusive()),
        ("doomed-fair", LockOptions::fair()),
    ] {
        let m = m.clone();
        waiting.push(tokio::spawn(async move {
            m.acquire(key, &opts).await.map(drop)
        }));
    }
    assert!(support::eventually(Duration::from_secs(10), || m.waiting() == 2).await);
    server.kill();
    let killed = Instant::now();
    for w in waiting {
        let err = w.await.unwrap().unwrap_err();
        assert!(err.is_unavailable(), "{err:?}");
    }
    assert!(
        killed.elapsed() < Duration::from_secs(5),
        "took {:?}",
        killed.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_notice_a_silently_frozen_redis_through_the_inbox_keepalive() {
    // A stopped server keeps its TCP connections open: nothing but the inbox's keepalive PING (every
    // 5 s) tells the waiter, which would otherwise sleep out the holder's 30 s lease.
    let server = RedisServer::start();
    let holder = manager_with_lease(&server, Duration::from_secs(30)).await;
    let m = manager_with_lease(&server, Duration::from_secs(30)).await;
    let _held = holder
        .acquire("frozen", &LockOptions::exclusive())
        .await
        .unwrap();
    let waiter = {
        let m = m.clone();
        tokio::spawn(async move {
            m.acquire("frozen", &LockOptions::exclusive())
                .await
                .map(drop)
        })
    };
    assert!(support::eventually(Duration::from_secs(10), || m.waiting() == 1).await);
    server.stop_process();
    let frozen = Instant::now();
    let outcome = waiter.await.unwrap();
    let elapsed = frozen.elapsed();
    server.continue_process();
    let err = outcome.unwrap_err();
    assert!(err.is_unavailable(), "{err:?}");
    assert!(elapsed < Duration::from_secs(8), "took {elapsed:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_attempt_that_timed_out_during_a_freeze_is_undone_when_its_reply_comes() {
    // The attempt reaches the frozen server's socket and runs when it resumes, taking the lock for
    // a caller that already got its error. Its late reply lets the manager release it at once,
    // instead of leaving it held for the whole 30 s lease.
    let server = RedisServer::start();
    let m = manager_with_lease(&server, Duration::from_secs(30)).await;
    // The connection this lock's commands use is open before the freeze.
    let warm_up = m.acquire("phantom", &LockOptions::exclusive()).await;
    warm_up.unwrap().release().await.unwrap();
    server.stop_process();
    let err = m
        .acquire("phantom", &LockOptions::exclusive())
        .await
        .unwrap_err();
    assert!(err.is_unavailable(), "{err:?}");
    server.continue_process();
    let resumed = Instant::now();
    let other = manager_with_lease(&server, Duration::from_secs(30)).await;
    let g = once_free(&other, "phantom", Duration::from_secs(5))
        .await
        .expect("the late attempt's lock was released, not left to its lease");
    println!("  free {:?} after the server resumed", resumed.elapsed());
    g.release().await.unwrap();
}
