//! A server that refuses connections fails every call at once with the cause, not after the
//! command timeout with "timed out waiting for a connection".

use std::sync::Mutex;
use std::time::{Duration, Instant};

use tower_lock::{LockManager, LockOptions};

use super::support::logs::{self, Warnings};
use super::support::{self, RedisServer};

/// Redis killed (connection refused): five calls in a row each fail well within the 2 s command
/// timeout, saying why (the last, on a connection it tried to open: refused). (Before, the first failed at once, and every later one waited 2 s for
/// bb8, which kept the connect error from its caller.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_connection_fails_every_call_at_once() {
    let mut server = RedisServer::start();
    let m = LockManager::builder()
        .redis(server.url())
        .command_timeout(Duration::from_secs(2))
        .build()
        .await
        .unwrap();
    drop(m.acquire("k", &LockOptions::exclusive()).await.unwrap());
    server.kill();
    for call in 0..5 {
        let started = Instant::now();
        let err = m
            .try_acquire("k", &LockOptions::exclusive())
            .await
            .unwrap_err();
        let took = started.elapsed();
        assert!(err.is_unavailable(), "call {call}: {err:?}");
        // the first call may go out on the connection that just died (broken pipe); a call that
        // opens a new one says it was refused
        let cause = err.to_string().to_lowercase();
        let told = ["refused", "broken pipe", "reset"]
            .iter()
            .any(|c| cause.contains(c));
        assert!(told, "call {call} hides the cause: {err}");
        if call == 4 {
            assert!(cause.contains("refused"), "call {call}: {err}");
        }
        assert!(
            took < Duration::from_secs(1),
            "call {call} took {took:?}: {err}"
        );
    }
}

fn manager_with(server: &RedisServer, command_timeout: Duration) -> tower_lock::LockManagerBuilder {
    LockManager::builder()
        .redis(server.url())
        .command_timeout(command_timeout)
}

/// A frozen server (SIGSTOP) answers nothing: a wait that ends with its attempt unanswered is
/// `Unavailable`, never `Timeout` (which says the lock was busy), both when no attempt was
/// answered and when the server froze after the lock was found busy. The wait timeout is shorter
/// than the command timeout, as in a layer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_server_ends_a_wait_as_unavailable_not_as_a_timeout() {
    let server = RedisServer::start();
    let build = |_| manager_with(&server, Duration::from_secs(10)).build();
    let (waiting, holding) = (build(()).await.unwrap(), build(()).await.unwrap());
    let wait = |ms| LockOptions::exclusive().wait_timeout(Duration::from_millis(ms));

    server.stop_process();
    let started = Instant::now();
    let frozen = waiting.acquire("k", &wait(500)).await.unwrap_err();
    server.continue_process();
    assert!(frozen.is_unavailable(), "{frozen:?}");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );

    // found busy first; the retry when the holder's lease ends meets a frozen server
    let short = LockOptions::exclusive().lease(Duration::from_millis(300));
    let _held = holding.acquire("k", &short).await.unwrap();
    let waiter = tokio::spawn({
        let waiting = waiting.clone();
        async move { waiting.acquire("k", &wait(2_000)).await }
    });
    assert!(support::eventually(Duration::from_secs(2), || waiting.waiting() == 1).await);
    server.stop_process();
    let outcome = waiter.await.unwrap();
    server.continue_process();
    let err = outcome.expect_err("no lock from a frozen server");
    assert!(err.is_unavailable(), "{err:?}");
}

/// An outage is logged at WARN once, however many calls fail; the next outage after the server
/// answered again is logged once more.
#[tokio::test]
async fn an_outage_is_logged_at_warn_once() {
    let (subscriber, warnings) = Warnings::new();
    let _logs = logs::set_thread_default(subscriber);
    let mut server = RedisServer::start();
    let m = manager_with(&server, Duration::from_secs(2))
        .build()
        .await
        .unwrap();
    let outage = |m: LockManager| async move {
        for _ in 0..5 {
            let err = m
                .try_acquire("k", &LockOptions::exclusive())
                .await
                .unwrap_err();
            assert!(err.is_unavailable(), "{err:?}");
        }
    };
    server.kill();
    outage(m.clone()).await;
    let unreachable = |w: &Mutex<Vec<String>>| {
        let w = w.lock().unwrap();
        w.iter().filter(|m| m.contains("unreachable")).count()
    };
    assert_eq!(unreachable(&warnings), 1, "{:?}", warnings.lock().unwrap());
    server.restart();
    let mut answered = false;
    for _ in 0..100 {
        if let Ok(Some(_)) = m.try_acquire("k", &LockOptions::exclusive()).await {
            answered = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(answered, "the restarted server never answered");
    server.kill();
    outage(m).await;
    assert_eq!(unreachable(&warnings), 2, "{:?}", warnings.lock().unwrap());
}

/// A warning this thread's subscriber waits for, from a call site that another thread (a test
/// with no subscriber) reached first: the subscriber still sees it.
#[test]
fn a_warning_reaches_the_test_whose_call_site_another_thread_reached_first() {
    fn warn(what: &str) {
        tracing::warn!(what, "a warning of this test only");
    }
    let (subscriber, warnings) = Warnings::new();
    let _logs = logs::set_thread_default(subscriber);
    std::thread::spawn(|| warn("from a thread with no subscriber"))
        .join()
        .unwrap();
    warn("from the test");
    let seen = warnings.lock().unwrap().clone();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert!(seen[0].contains("from the test"), "{seen:?}");
}
