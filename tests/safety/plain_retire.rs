//! A plain lock's release (`plain_release.lua`) writes the fencing counter only when the server's
//! clock may not have passed the last token handed out under the hold: the token of an
//! uncontended hold is the server's clock, which has passed it by the release. A token that led
//! the clock (the counter was ahead of it), and the tokens a cohort handed on in memory, are kept
//! in the counter, and the next acquisition, of any process, gets a higher one.

use std::time::Duration;

use tower_lock::{LockManager, LockOptions};

use super::support::{self, RedisServer};

const FENCE: &str = "{tower-lock:k}:f";

async fn manager(server: &RedisServer) -> LockManager {
    LockManager::redis(&server.url()).await.expect("manager")
}

/// The server's clock in microseconds.
fn server_clock(server: &RedisServer) -> u64 {
    let time = server.cmd(&["TIME"]).as_strings().expect("TIME");
    time[0].parse::<u64>().unwrap() * 1_000_000 + time[1].parse::<u64>().unwrap()
}

/// Put the fencing counter of `k` ten seconds ahead of the server's clock (as a lagging clock,
/// or a restored counter, may leave it): the next token is the counter's, not the clock's.
fn counter_ahead(server: &RedisServer) -> u64 {
    let ahead = server_clock(server) + 10_000_000;
    server.cmd(&["SET", FENCE, &ahead.to_string(), "PX", "60000"]);
    ahead
}

/// The counter of `k`, if it exists.
fn counter(server: &RedisServer) -> Option<u64> {
    server.cmd(&["GET", FENCE]).as_string()?.parse().ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hold_the_clock_passed_leaves_the_counter_alone() {
    let server = RedisServer::start();
    let m = manager(&server).await;
    let warm = m.acquire("warm", &LockOptions::exclusive()).await.unwrap();
    warm.release().await.unwrap();
    for opts in [LockOptions::exclusive(), LockOptions::fair()] {
        let sets = server.command_calls("set");
        let guard = m.acquire("k", &opts).await.unwrap();
        // the token is the server's clock, which runs on while the lock is held
        std::thread::sleep(Duration::from_micros(200));
        guard.release().await.unwrap();
        assert_eq!(
            server.command_calls("set"),
            sets + 1,
            "SET NX took the lock and nothing wrote the counter ({opts:?})"
        );
        assert_eq!(counter(&server), None);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_ahead_of_the_clock_is_passed_by_the_next_one() {
    let server = RedisServer::start();
    let (a, b) = (manager(&server).await, manager(&server).await);
    for (i, opts) in [LockOptions::exclusive(), LockOptions::fair()]
        .iter()
        .enumerate()
    {
        let ahead = counter_ahead(&server);
        let guard = a.acquire("k", opts).await.unwrap();
        let token = guard.fencing_token();
        assert_eq!(token, ahead + 1, "the counter's token, not the clock's");
        guard.release().await.unwrap();
        assert_eq!(counter(&server), Some(token), "the release kept it");
        let next = [&a, &b][i].acquire("k", opts).await.unwrap();
        assert!(next.fencing_token() > token, "{opts:?}");
        next.release().await.unwrap();
    }
}

/// Tokens a cohort handed on in memory count: the counter keeps the last one, and another
/// process's next token is above it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_handed_on_in_memory_are_passed_by_the_next_one() {
    let server = RedisServer::start();
    let (a, b) = (manager(&server).await, manager(&server).await);
    counter_ahead(&server);
    let first = a.acquire("k", &LockOptions::exclusive()).await.unwrap();
    let heir = {
        let a = a.clone();
        tokio::spawn(async move {
            let guard = a.acquire("k", &LockOptions::exclusive()).await.unwrap();
            let token = guard.fencing_token();
            guard.release().await.unwrap();
            token
        })
    };
    assert!(support::eventually(Duration::from_secs(5), || a.waiting() == 1).await);
    let token = first.fencing_token();
    first.release().await.unwrap();
    let handed = heir.await.unwrap();
    assert_eq!(handed, token + 1, "handed on in memory");
    assert_eq!(
        counter(&server),
        Some(handed),
        "the release kept the last token"
    );
    let next = b.acquire("k", &LockOptions::exclusive()).await.unwrap();
    assert!(next.fencing_token() > handed);
    next.release().await.unwrap();
}
