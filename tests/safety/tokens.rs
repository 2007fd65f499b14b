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
    // a key of our own shows the snapshot came back (the counter is written only for holds
    // shorter than a block's width)
    server.cmd(&["SET", "tokens-test:saved", "1"]);
    assert!(server.cmd(&["SAVE"]).is_ok());
    for (seen, (key, opts)) in tokens.iter_mut().zip(&modes) {
        seen.extend(three_tokens(&m, key, opts).await);
    }
    server.restart();
    assert_eq!(
        server.cmd(&["EXISTS", "tokens-test:saved"]).as_int(),
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

/// The fencing counter ahead of the clock (as after the server's clock stepped back): each hold
/// then ends long before its block of 64 tokens would on the counter's time, and the release must
/// leave the last token handed out under it to the next one. Takes, a fair grant made by a
/// release, a cohort's local hand-off and the take after it: every token is above the counter and
/// above every token before it (the local hand-off takes the next one of its leader's). A hold
/// made by script (the grant) leaves its whole block; a plain one, the tokens it handed out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_rise_while_the_counter_is_ahead_of_the_clock() {
    let server = RedisServer::start();
    let url = server.url();
    let (m, other) = (
        LockManager::redis(&url).await.unwrap(),
        LockManager::redis(&url).await.unwrap(),
    );
    let time = server.cmd(&["TIME"]).as_strings().unwrap();
    let now_us: u64 = time[0].parse::<u64>().unwrap() * 1_000_000 + time[1].parse::<u64>().unwrap();
    let ahead = now_us + 60_000_000;
    server.cmd(&["SET", "{tower-lock:k}:f", &ahead.to_string(), "PX", "60000"]);
    let (exclusive, fair) = (LockOptions::exclusive(), LockOptions::fair());

    let mut tokens = three_tokens(&m, "k", &exclusive).await;
    let held = m.acquire("k", &fair).await.unwrap();
    tokens.push(held.fencing_token());
    let granted = tokens_of_a_grant(&server, &other, held).await;
    tokens.push(granted);
    let leader = m.acquire("k", &exclusive).await.unwrap();
    let handed = tokio::spawn({
        let m = m.clone();
        async move { m.acquire("k", &LockOptions::exclusive()).await.unwrap() }
    });
    assert!(super::support::eventually(Duration::from_secs(5), || m.waiting() == 1).await);
    tokens.push(leader.fencing_token());
    leader.release().await.unwrap();
    let handed = handed.await.unwrap();
    let local = handed.fencing_token();
    tokens.push(local);
    handed.release().await.unwrap();
    tokens.push(one_token(&other, "k", &exclusive).await);

    assert!(tokens[0] > ahead, "a token below the counter: {tokens:?}");
    assert_increasing("local and remote hand-offs", &tokens);
    let leader = tokens[tokens.len() - 3];
    assert!(
        leader >= granted + 64,
        "a token within the block of the grant's hold: {tokens:?}"
    );
    assert_eq!(local, leader + 1, "the local hand-off");
}

/// `held` (fair) is released while a fair request of `other` waits in Redis's queue: the token
/// of its grant, a hold the release script made.
async fn tokens_of_a_grant(
    server: &RedisServer,
    other: &LockManager,
    held: tower_lock::LockGuard,
) -> u64 {
    let waiting = tokio::spawn({
        let other = other.clone();
        async move { other.acquire("k", &LockOptions::fair()).await.unwrap() }
    });
    // counted by its manager first, then queued by its script
    let queued =
        || other.waiting() == 1 && server.cmd(&["LLEN", "{tower-lock:k}:ql"]).as_int() == Some(1);
    assert!(super::support::eventually(Duration::from_secs(5), queued).await);
    held.release().await.unwrap();
    let granted = waiting.await.unwrap();
    let token = granted.fencing_token();
    granted.release().await.unwrap();
    token
}
