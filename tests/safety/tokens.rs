//! Fencing tokens strictly increase per lock over every acquisition, ever: after a Redis restart
//! that loads a snapshot taken before the last tokens were issued, and after the process restarts
//! (a new memory backend).

use std::time::Duration;

use tower_lock::{LockManager, LockOptions};

use super::support::RedisServer;

/// Take and release `key` once, retrying while the manager's connections come back after a
/// restart; the token.
async fn one_token(m: &LockManager, key: &str, opts: &LockOptions) -> u64 {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        match m.acquire(key, opts).await {
            Ok(guard) => {
                let token = guard.fencing_token();
                guard.release().await.unwrap();
                return token;
            }
            Err(err) => {
                assert!(tokio::time::Instant::now() < deadline, "{key}: {err}");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

async fn three_tokens(m: &LockManager, key: &str, opts: &LockOptions) -> Vec<u64> {
    let mut tokens = Vec::new();
    for _ in 0..3 {
        tokens.push(one_token(m, key, opts).await);
    }
    tokens
}

fn assert_increasing(what: &str, tokens: &[u64]) {
    assert!(
        tokens.windows(2).all(|w| w[0] < w[1]),
        "{what}: tokens repeat or go back: {tokens:?}"
    );
}

/// Three tokens, `SAVE`, three more, a crash (kill -9) and a restart from the snapshot, three
/// more: all nine strictly increase (before, the counter came back from the snapshot and the
/// last three were issued again), in exclusive and fair mode.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_increase_across_a_restart_from_a_snapshot() {
    let mut server = RedisServer::start();
    let m = LockManager::builder()
        .redis(server.url())
        .command_timeout(Duration::from_millis(500))
        .build()
        .await
        .unwrap();
    let modes = [
        ("exclusive", LockOptions::exclusive()),
        ("fair", LockOptions::fair()),
    ];
    let mut tokens = [Vec::new(), Vec::new()];
    for (seen, (key, opts)) in tokens.iter_mut().zip(&modes) {
        seen.extend(three_tokens(&m, key, opts).await);
    }
    assert!(server.cmd(&["SAVE"]).is_ok());
    for (seen, (key, opts)) in tokens.iter_mut().zip(&modes) {
        seen.extend(three_tokens(&m, key, opts).await);
    }
    server.restart();
    assert_eq!(
        server.cmd(&["EXISTS", "{tower-lock:exclusive}:f"]).as_int(),
        Some(1),
        "the restart did not load the snapshot"
    );
    for (seen, (key, opts)) in tokens.iter_mut().zip(&modes) {
        seen.extend(three_tokens(&m, key, opts).await);
        assert_increasing(key, seen);
    }
}

/// A process that restarts issues tokens above every one the process before it issued.
#[tokio::test]
async fn memory_tokens_increase_across_processes() {
    let mut tokens = Vec::new();
    for _process in 0..3 {
        let m = LockManager::memory();
        tokens.extend(three_tokens(&m, "k", &LockOptions::exclusive()).await);
    }
    assert_increasing("memory", &tokens);
}
