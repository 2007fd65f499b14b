//! A server that refuses connections fails every call at once with the cause, not after the
//! command timeout with "timed out waiting for a connection".

use std::time::{Duration, Instant};

use tower_lock::{LockManager, LockOptions};

use super::support::RedisServer;

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
