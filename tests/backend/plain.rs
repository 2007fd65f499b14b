//! The plain path on a real redis-server: a free exclusive lock taken by a cohort's leader with
//! `SET NX` and no script, and how every other request and script meets such a lock.

use std::time::{Duration, Instant};

use tower_lock::{LockError, LockManager, LockOptions};

use crate::support::{self, RedisServer};

async fn manager(server: &RedisServer) -> LockManager {
    LockManager::redis(&server.url()).await.expect("manager")
}

/// A manager with cohorting off: its fair requests take plain locks under their own owner ids,
/// as requests with a fixed lease do (with cohorting, a re-entry stays in memory:
/// `tests/safety/cohorts.rs`).
async fn uncohorted(server: &RedisServer) -> LockManager {
    let builder = LockManager::builder().redis(server.url());
    builder.local_handoffs(0).build().await.expect("manager")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_free_exclusive_lock_is_taken_without_a_script() {
    let server = RedisServer::start();
    let m = manager(&server).await;
    let warm = m.acquire("warm", &LockOptions::exclusive()).await.unwrap();
    warm.release().await.unwrap();
    let (scripts, sets) = (server.command_calls("evalsha"), server.command_calls("set"));
    let guard = m.acquire("k", &LockOptions::exclusive()).await.unwrap();
    assert_eq!(server.command_calls("evalsha"), scripts, "no script ran");
    assert_eq!(server.command_calls("set"), sets + 1);
    assert_eq!(
        server
            .cmd(&["TYPE", "{tower-lock:k}"])
            .as_string()
            .as_deref(),
        Some("string")
    );
    let holder = server.cmd(&["GET", "{tower-lock:k}"]).as_string().unwrap();
    assert!(holder.starts_with(&format!("{}:", m.id())), "{holder}");
    let now_us = server.cmd(&["TIME"]).as_strings().unwrap();
    let now_us: u64 = now_us[0].parse::<u64>().unwrap() * 1_000_000;
    assert!(
        guard.fencing_token() >= now_us - 5_000_000,
        "the token is floored by the server's clock"
    );
    guard.release().await.unwrap();
    assert_eq!(server.cmd(&["EXISTS", "{tower-lock:k}"]).as_int(), Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_of_every_mode_meet_a_plain_lock_as_a_held_exclusive_lock() {
    let server = RedisServer::start();
    let (holder, other) = (manager(&server).await, manager(&server).await);
    let held = holder
        .acquire("k", &LockOptions::exclusive())
        .await
        .unwrap();
    let token = held.fencing_token();
    let wait = Duration::from_secs(10);
    let exclusive = tokio::spawn({
        let other = other.clone();
        async move {
            let opts = LockOptions::exclusive().wait_timeout(wait);
            other.acquire("k", &opts).await
        }
    });
    let fair = tokio::spawn({
        let other = other.clone();
        async move {
            let opts = LockOptions::fair().wait_timeout(wait);
            other.acquire("k", &opts).await
        }
    });
    // a read of a plain lock finds it held, as of any exclusive lock (one exclusion)
    let read = other.try_acquire("k", &LockOptions::read()).await;
    assert!(matches!(read, Ok(None)), "{read:?}");
    assert!(other
        .try_acquire("k", &LockOptions::exclusive())
        .await
        .unwrap()
        .is_none());
    assert!(support::eventually(Duration::from_secs(5), || other.waiting() == 2).await);
    // the waiters are told at the release, long before the 30 s lease would run out
    let released = Instant::now();
    held.release().await.unwrap();
    let first = tokio::select! {
        g = exclusive => g.unwrap(),
        g = fair => g.unwrap(),
    }
    .expect("a waiter takes the released lock");
    assert!(released.elapsed() < Duration::from_secs(5));
    assert!(first.fencing_token() > token);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_attempt_gives_way_to_fair_requests_queued_for_a_free_lock() {
    let server = RedisServer::start();
    let (holder, fair, late) = (
        manager(&server).await,
        manager(&server).await,
        manager(&server).await,
    );
    let held = holder
        .acquire("k", &LockOptions::exclusive())
        .await
        .unwrap();
    let queued = tokio::spawn({
        let fair = fair.clone();
        async move { fair.acquire("k", &LockOptions::fair()).await }
    });
    // queued in Redis, not only in its manager
    let queued_in_redis = || server.cmd(&["LLEN", "{tower-lock:k}:ql"]).as_int() == Some(1);
    assert!(support::eventually(Duration::from_secs(5), queued_in_redis).await);
    // the holder's lease runs out: the lock is free, and a fair request queues for it
    server.cmd(&["DEL", "{tower-lock:k}"]);
    let late_attempt = tokio::spawn({
        let late = late.clone();
        async move { late.acquire("k", &LockOptions::exclusive()).await }
    });
    let first = tokio::time::timeout(Duration::from_secs(10), queued)
        .await
        .expect("the queued request gets the lock")
        .unwrap()
        .unwrap();
    assert!(
        !late_attempt.is_finished(),
        "the later request waits its turn"
    );
    let first_token = first.fencing_token();
    first.release().await.unwrap();
    let second = tokio::time::timeout(Duration::from_secs(10), late_attempt)
        .await
        .expect("the later request follows")
        .unwrap()
        .unwrap();
    assert!(second.fencing_token() > first_token);
    drop(held);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_rise_across_short_plain_holds_and_scripted_ones() {
    let server = RedisServer::start();
    let (a, b) = (manager(&server).await, manager(&server).await);
    let mut last = 0;
    for i in 0..300 {
        let (m, opts) = match i % 3 {
            0 => (&a, LockOptions::exclusive()),
            1 => (&b, LockOptions::exclusive()),
            _ => (&a, LockOptions::fair()),
        };
        let guard = m.acquire("k", &opts).await.unwrap();
        let token = guard.fencing_token();
        assert!(token > last, "hold {i}: token {token} after {last}");
        last = token;
        guard.release().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_free_fair_lock_is_taken_without_a_script_and_marks_its_mode() {
    let server = RedisServer::start();
    let m = manager(&server).await;
    let scripts = server.command_calls("evalsha");
    let guard = m.acquire("k", &LockOptions::fair()).await.unwrap();
    assert_eq!(server.command_calls("evalsha"), scripts, "no script ran");
    let value = server.cmd(&["GET", "{tower-lock:k}"]).as_string().unwrap();
    assert!(value.starts_with(&format!("!{}:", m.id())), "{value}");
    // an exclusive request of another manager waits in the fair queue, as behind any fair hold
    let other = manager(&server).await;
    let waiting = tokio::spawn({
        let other = other.clone();
        async move { other.acquire("k", &LockOptions::exclusive()).await }
    });
    let queued = || server.cmd(&["LLEN", "{tower-lock:k}:ql"]).as_int() == Some(1);
    assert!(support::eventually(Duration::from_secs(5), queued).await);
    let token = guard.fencing_token();
    guard.release().await.unwrap();
    let next = waiting.await.unwrap().unwrap();
    assert!(next.fencing_token() > token);
}

/// A fair re-entry meets its owner's plain lock: it makes it a hash, under the same token, and
/// the two holds are released one after the other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fair_reentry_turns_its_plain_lock_into_a_hash_under_the_same_token() {
    let server = RedisServer::start();
    let (m, other) = (uncohorted(&server).await, manager(&server).await);
    let owner = m.owner();
    let outer = owner.acquire("k", &LockOptions::fair()).await.unwrap();
    let kind = || server.cmd(&["TYPE", "{tower-lock:k}"]).as_string();
    assert_eq!(kind().as_deref(), Some("string"));
    let inner = owner.acquire("k", &LockOptions::fair()).await.unwrap();
    assert_eq!(kind().as_deref(), Some("hash"));
    assert_eq!(inner.fencing_token(), outer.fencing_token());
    inner.release().await.unwrap();
    let busy = other.try_acquire("k", &LockOptions::fair()).await.unwrap();
    assert!(busy.is_none(), "the outer hold still holds");
    // renewals keep the converted hold (a watchdog lease of 30 s: one renewal is enough to look)
    assert!(!outer.is_lost());
    let outer_token = outer.fencing_token();
    outer.release().await.unwrap();
    assert_eq!(server.cmd(&["EXISTS", "{tower-lock:k}"]).as_int(), Some(0));
    let next = other.acquire("k", &LockOptions::fair()).await.unwrap();
    assert!(next.fencing_token() > outer_token);
}

/// Two requests of one owner at once: one takes the lock on the plain path, the other re-enters
/// it once the first one's token is known.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_fair_requests_of_one_owner_both_hold() {
    let server = RedisServer::start();
    let m = uncohorted(&server).await;
    for round in 0..20 {
        let owner = m.owner();
        let key = format!("k{round}");
        let opts = LockOptions::fair().wait_timeout(Duration::from_secs(5));
        let (a, b) = tokio::join!(owner.acquire(&key, &opts), owner.acquire(&key, &opts));
        let (a, b) = (a.unwrap(), b.unwrap());
        assert_eq!(a.fencing_token(), b.fencing_token(), "round {round}");
        a.release().await.unwrap();
        b.release().await.unwrap();
        let left = server.cmd(&["EXISTS", &format!("{{tower-lock:{key}}}")]);
        assert_eq!(left.as_int(), Some(0), "round {round}");
    }
}

/// An owner whose plain hold was lost takes the lock again: the lost guard's release, bound to
/// its own hold, must not free the new one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_plain_holds_release_leaves_its_owners_new_hold() {
    let server = RedisServer::start();
    let short = || {
        LockManager::builder()
            .redis(server.url())
            .lease(Duration::from_millis(600))
            .local_handoffs(0) // as in `uncohorted`
            .build()
    };
    let (m, other) = (short().await.unwrap(), short().await.unwrap());
    let owner = m.owner();
    let lost = owner.acquire("k", &LockOptions::fair()).await.unwrap();
    server.cmd(&["DEL", "{tower-lock:k}"]);
    tokio::time::timeout(Duration::from_secs(3), lost.lost())
        .await
        .expect("the next renewal finds the hold gone");
    // (the lost guard is still live in its manager: the lock is taken again by script, as a
    // hash, which the lost hold's plain release must find is not its own)
    let again = owner.acquire("k", &LockOptions::fair()).await.unwrap();
    assert!(again.fencing_token() > lost.fencing_token());
    let released = lost.release().await;
    assert!(
        matches!(released, Err(LockError::NotHeld { .. })),
        "{released:?}"
    );
    let exists = server.cmd(&["EXISTS", "{tower-lock:k}"]).as_int();
    assert_eq!(exists, Some(1), "the new hold is in place");
    let busy = other.try_acquire("k", &LockOptions::fair()).await.unwrap();
    assert!(busy.is_none(), "nobody else gets the lock");
    again.release().await.unwrap();
    assert!(other
        .try_acquire("k", &LockOptions::fair())
        .await
        .unwrap()
        .is_some());
}

/// A plain lock made a hash between the re-entry's answer and its manager's bookkeeping (here by
/// hand: the hash a fair re-entry makes) is released as a hash, by its token: the plain release
/// finds a hash and leaves it to the release script.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_release_that_finds_a_hash_releases_it_by_its_token() {
    let server = RedisServer::start();
    let (m, other) = (uncohorted(&server).await, manager(&server).await);
    let guard = m.acquire("k", &LockOptions::fair()).await.unwrap();
    let value = server.cmd(&["GET", "{tower-lock:k}"]).as_string().unwrap();
    let owner = value.trim_start_matches('!').split('|').next().unwrap();
    let token = guard.fencing_token().to_string();
    server.cmd(&["DEL", "{tower-lock:k}"]);
    server.cmd(&[
        "HSET",
        "{tower-lock:k}",
        owner,
        "1",
        "#t",
        &token,
        "#f",
        "1",
        "#w",
        "1",
    ]);
    server.cmd(&["PEXPIRE", "{tower-lock:k}", "30000"]);
    guard.release().await.expect("released as a hash");
    assert_eq!(server.cmd(&["EXISTS", "{tower-lock:k}"]).as_int(), Some(0));
    let next = other.acquire("k", &LockOptions::fair()).await.unwrap();
    assert!(next.fencing_token() > token.parse().unwrap());
}
