//! A frozen Redis (SIGSTOP) is answered within the command timeout, and work resumes at once
//! when it does: requests already waiting for a lock end as `Unavailable` once a command of
//! their manager goes unanswered for the command timeout (they would otherwise sleep for a
//! wake-up that cannot come), and after SIGCONT new requests succeed within a second.

use std::time::{Duration, Instant};

use tokio::task::JoinSet;
use tower_lock::{LockError, LockManager, LockOptions};

use crate::support::{self, RedisServer};

/// Small, to keep the tests short; the promise scales with it.
const COMMAND_TIMEOUT: Duration = Duration::from_millis(500);

/// What a request may take beyond the command timeout: the timer that ends the unanswered command
/// and the wake-ups of the waiters, on a test machine whose two cores other builds share. Before,
/// waiting requests took the inbox's 5 s keepalive and one more command timeout.
const MARGIN: Duration = Duration::from_millis(250);

/// The bound on recovery: new requests succeed within this long after SIGCONT.
const RECOVERY: Duration = Duration::from_secs(1);

async fn manager(server: &RedisServer) -> LockManager {
    LockManager::builder()
        .redis(server.url())
        // every release goes to Redis, not to a waiting request of the same process in memory
        .local_handoffs(0)
        .command_timeout(COMMAND_TIMEOUT)
        .lease(Duration::from_secs(30))
        .build()
        .await
        .expect("manager")
}

/// Requests that wait for `key` (held) on `m`, each ending with its outcome and when it ended.
fn waiters(
    m: &LockManager,
    key: &str,
    opts: &LockOptions,
    n: usize,
    tasks: &mut JoinSet<(Result<(), LockError>, Instant)>,
) {
    for _ in 0..n {
        let (m, key, opts) = (m.clone(), key.to_owned(), *opts);
        tasks.spawn(async move {
            let outcome = m.acquire(&key, &opts).await.map(drop);
            (outcome, Instant::now())
        });
    }
}

/// The freeze: requests wait for locks their own replica holds (exclusive, fair, write);
/// Redis freezes and the handlers finish, so their releases go out unanswered. Every waiting
/// request ends as `Unavailable` within the command timeout (+ `MARGIN`) of the freeze; before,
/// it slept until the inbox's keepalive found the freeze (about 5 s), then sent an attempt that
/// timed out too. After SIGCONT, new requests on the same locks succeed within a second.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_waiting_when_redis_freezes_end_within_the_command_timeout() {
    let server = RedisServer::start();
    let m = manager(&server).await;
    let locks = [
        ("ice/exclusive", LockOptions::exclusive()),
        ("ice/fair", LockOptions::fair()),
        ("ice/write", LockOptions::write()),
    ];
    let mut held = Vec::new();
    let mut tasks = JoinSet::new();
    for (key, opts) in &locks {
        held.push(m.acquire(key, opts).await.expect("held"));
        // no wait timeout: only the freeze can end these waits
        waiters(&m, key, opts, 4, &mut tasks);
    }
    assert!(support::eventually(Duration::from_secs(5), || m.waiting() == 12).await);

    server.stop_process();
    let frozen = Instant::now();
    drop(held);
    let ended = tasks.join_all().await;
    let resumed_at = Instant::now();
    server.continue_process();
    for (outcome, at) in &ended {
        let err = outcome.as_ref().expect_err("no lock from a frozen server");
        assert!(err.is_unavailable(), "{err:?}");
        let took = at.duration_since(frozen);
        assert!(
            took <= COMMAND_TIMEOUT + MARGIN,
            "a waiting request ended {took:?} after the freeze: {err}"
        );
    }

    // new requests on the same locks, each holding briefly
    let mut tasks = JoinSet::new();
    for (key, opts) in locks {
        for _ in 0..4 {
            let m = m.clone();
            tasks.spawn(async move {
                let guard = m.acquire(key, &opts).await?;
                guard.release().await.map(|_| Instant::now())
            });
        }
    }
    for outcome in tasks.join_all().await {
        let done = outcome.expect("a request after SIGCONT");
        let took = done.duration_since(resumed_at);
        assert!(took <= RECOVERY, "a request after SIGCONT took {took:?}");
    }
}

/// A waiter whose lock another replica holds, on a replica that only sends a request of its own
/// after the freeze (the usual traffic of a service): that request's unanswered attempt ends the
/// wait too, within the command timeout of the attempt.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_ends_when_another_request_of_its_manager_goes_unanswered() {
    let server = RedisServer::start();
    let (holder, m) = (manager(&server).await, manager(&server).await);
    let _held = holder
        .acquire("cold", &LockOptions::exclusive())
        .await
        .expect("held");
    let mut tasks = JoinSet::new();
    waiters(&m, "cold", &LockOptions::exclusive(), 2, &mut tasks);
    assert!(support::eventually(Duration::from_secs(5), || m.waiting() == 2).await);

    server.stop_process();
    let sent = Instant::now();
    let other = m.try_acquire("elsewhere", &LockOptions::exclusive()).await;
    let ended = tasks.join_all().await;
    server.continue_process();
    assert!(other.expect_err("frozen").is_unavailable());
    for (outcome, at) in ended {
        let err = outcome.expect_err("no lock from a frozen server");
        assert!(err.is_unavailable(), "{err:?}");
        let took = at.duration_since(sent);
        assert!(took <= COMMAND_TIMEOUT + MARGIN, "ended {took:?} after");
    }
}

/// A waiter whose lock another replica holds, on a replica that sends nothing else: its inbox
/// checks the connection every half command timeout while requests wait, and a check left
/// unanswered for the command timeout ends the wait, within one and a half command timeouts of
/// the freeze. Before, the check came every 5 s, and the waiter only re-checked (and waited out
/// one more command timeout) when it failed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_of_a_quiet_replica_ends_within_one_and_a_half_command_timeouts() {
    let server = RedisServer::start();
    let (holder, m) = (manager(&server).await, manager(&server).await);
    let _held = holder
        .acquire("quiet", &LockOptions::exclusive())
        .await
        .expect("held");
    let mut tasks = JoinSet::new();
    waiters(&m, "quiet", &LockOptions::exclusive(), 2, &mut tasks);
    assert!(support::eventually(Duration::from_secs(5), || m.waiting() == 2).await);

    server.stop_process();
    let frozen = Instant::now();
    let ended = tasks.join_all().await;
    server.continue_process();
    for (outcome, at) in ended {
        let err = outcome.expect_err("no lock from a frozen server");
        assert!(err.is_unavailable(), "{err:?}");
        let took = at.duration_since(frozen);
        assert!(
            took <= COMMAND_TIMEOUT * 3 / 2 + MARGIN,
            "ended {took:?} after the freeze"
        );
    }
}
