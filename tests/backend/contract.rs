//! The lock contract, run against the memory backend and against a real redis-server:
//! mutual exclusion, re-entry, try_acquire, wait timeouts, fixed leases, fencing, cancellation.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tower_lock::{KeyError, LockError, LockManager, LockOptions};

use crate::on_both_backends;
use crate::support;
use crate::support::fixture::Fixture;
use crate::support::{eventually, GENEROUS};

on_both_backends!(
    mutual_exclusion_across_two_managers,
    reentry_shares_the_token_and_counts_holds,
    try_acquire_never_waits,
    wait_timeout_is_honoured,
    leaked_fixed_lease_guard_frees_the_lock,
    waiter_is_woken_by_release_not_by_expiry,
    fencing_tokens_strictly_increase,
    dropped_waiting_future_leaves_nothing_behind,
    cancelled_waiter_passes_its_wake_up_on,
    invalid_keys_are_rejected,
);

async fn mutual_exclusion_across_two_managers(fx: Fixture) {
    let managers = [fx.manager().await, fx.manager().await];
    let inside = Arc::new(AtomicUsize::new(0));
    let max_inside = Arc::new(AtomicUsize::new(0));
    let done = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for t in 0..40 {
        let m = managers[t % 2].clone();
        let (inside, max_inside, done) = (inside.clone(), max_inside.clone(), done.clone());
        tasks.push(tokio::spawn(async move {
            for _ in 0..10 {
                let guard = m
                    .acquire("account:42", &LockOptions::exclusive())
                    .await
                    .expect("acquire");
                let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                max_inside.fetch_max(now, Ordering::SeqCst);
                tokio::task::yield_now().await;
                inside.fetch_sub(1, Ordering::SeqCst);
                done.fetch_add(1, Ordering::SeqCst);
                guard.release().await.expect("release");
            }
        }));
    }
    for t in tasks {
        t.await.expect("task");
    }
    assert_eq!(max_inside.load(Ordering::SeqCst), 1, "two holders at once");
    assert_eq!(done.load(Ordering::SeqCst), 400);
}

async fn reentry_shares_the_token_and_counts_holds(fx: Fixture) {
    let m = fx.manager().await;
    let other = fx.manager().await;
    let opts = LockOptions::exclusive();
    let owner = m.owner();
    let g1 = owner.acquire("k", &opts).await.unwrap();
    let g2 = owner.acquire("k", &opts).await.unwrap();
    assert_eq!(g1.fencing_token(), g2.fencing_token());
    assert!(other.try_acquire("k", &opts).await.unwrap().is_none());
    g2.release().await.unwrap();
    assert!(
        other.try_acquire("k", &opts).await.unwrap().is_none(),
        "one hold is left"
    );
    let first = g1.fencing_token();
    g1.release().await.unwrap();
    let g3 = other
        .try_acquire("k", &opts)
        .await
        .unwrap()
        .expect("free after the last hold");
    assert!(g3.fencing_token() > first);
}

async fn try_acquire_never_waits(fx: Fixture) {
    let m = fx.manager().await;
    let opts = LockOptions::exclusive();
    let held = m.try_acquire("t", &opts).await.unwrap().expect("free");
    let started = Instant::now();
    assert!(m.try_acquire("t", &opts).await.unwrap().is_none());
    assert!(started.elapsed() < Duration::from_secs(2));
    // a different key is independent
    assert!(m.try_acquire("u", &opts).await.unwrap().is_some());
    drop(held);
    let again = m
        .acquire("t", &opts.wait_timeout(Duration::from_secs(10)))
        .await;
    assert!(again.is_ok(), "a dropped guard frees the lock: {again:?}");
}

async fn wait_timeout_is_honoured(fx: Fixture) {
    let m = fx.manager().await;
    let _held = m.acquire("w", &LockOptions::exclusive()).await.unwrap();
    let started = Instant::now();
    let waited = m
        .acquire(
            "w",
            &LockOptions::exclusive().wait_timeout(Duration::from_millis(300)),
        )
        .await;
    let elapsed = started.elapsed();
    assert!(
        matches!(waited, Err(LockError::Timeout { ref key, .. }) if key == "w"),
        "{waited:?}"
    );
    assert!(
        elapsed >= Duration::from_millis(300),
        "gave up early: {elapsed:?}"
    );
    assert!(
        elapsed < Duration::from_secs(3),
        "waited past its timeout: {elapsed:?}"
    );
    assert_eq!(m.waiting(), 0);
}

async fn leaked_fixed_lease_guard_frees_the_lock(fx: Fixture) {
    let m = fx.manager().await;
    let other = fx.manager().await;
    let fixed = LockOptions::exclusive().lease(Duration::from_millis(300));
    let guard = m.acquire("leak", &fixed).await.unwrap();
    let info = guard.info();
    std::mem::forget(guard); // never released
    let started = Instant::now();
    let next = other
        .acquire(
            "leak",
            &LockOptions::exclusive().wait_timeout(Duration::from_secs(10)),
        )
        .await
        .expect("the lease runs out");
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(info.is_lost());
    tokio::time::timeout(Duration::from_secs(1), info.lost())
        .await
        .expect("lost() resolves");
    assert!(next.fencing_token() > info.fencing_token());
}

async fn waiter_is_woken_by_release_not_by_expiry(fx: Fixture) {
    // watchdog lease of 30 s: a waiter that relied on expiry would wait about that long
    let m = fx.manager().await;
    let other = fx.manager().await;
    let held = m.acquire("wake", &LockOptions::exclusive()).await.unwrap();
    let waiter = tokio::spawn(async move {
        let opts = LockOptions::exclusive().wait_timeout(Duration::from_secs(20));
        let g = other.acquire("wake", &opts).await;
        (Instant::now(), g.map(|g| g.fencing_token()))
    });
    assert!(
        eventually(GENEROUS, || waiting_total(&fx, &m) >= 1).await,
        "condition not reached in 10 s"
    );
    let released_at = Instant::now();
    held.release().await.unwrap();
    let (acquired_at, token) = waiter.await.unwrap();
    assert!(token.is_ok(), "{token:?}");
    assert!(acquired_at.duration_since(released_at) < Duration::from_secs(5));
}

async fn fencing_tokens_strictly_increase(fx: Fixture) {
    let managers = [fx.manager().await, fx.manager().await];
    let mut last = 0;
    for i in 0..50 {
        let g = managers[i % 2]
            .acquire("fence", &LockOptions::exclusive())
            .await
            .unwrap();
        assert!(
            g.fencing_token() > last,
            "token went back: {} after {last}",
            g.fencing_token()
        );
        last = g.fencing_token();
        g.release().await.unwrap();
    }
    if let Fixture::Redis(server) = &fx {
        // the counter is written only for a hold that ended within its block's width (64 µs),
        // and expires when the lock idles; the server clock keeps tokens rising
        let keys = server.cmd(&["KEYS", "*fence*"]).as_strings().unwrap();
        let counter = "{tower-lock:fence}:f".to_owned();
        assert!(
            keys.iter().all(|k| *k == counter),
            "only the counter may remain: {keys:?}"
        );
        assert!(
            keys.iter()
                .all(|k| server.cmd(&["PTTL", k]).as_int().unwrap() > 0),
            "the counter expires"
        );
        server.cmd(&["DEL", &counter]);
        let g = managers[0]
            .acquire("fence", &LockOptions::exclusive())
            .await
            .unwrap();
        assert!(
            g.fencing_token() > last,
            "token went back after the counter expired"
        );
    }
}

async fn dropped_waiting_future_leaves_nothing_behind(fx: Fixture) {
    let m = fx.manager().await;
    let other = fx.manager().await;
    let held = m
        .acquire("cancel", &LockOptions::exclusive())
        .await
        .unwrap();
    let waiting = {
        let other = other.clone();
        tokio::spawn(async move {
            other
                .acquire("cancel", &LockOptions::exclusive())
                .await
                .map(drop)
        })
    };
    assert!(
        eventually(GENEROUS, || waiting_total(&fx, &m) >= 1).await,
        "condition not reached in 10 s"
    );
    waiting.abort();
    assert!(waiting.await.unwrap_err().is_cancelled());
    assert_eq!(other.waiting(), 0);
    if !fx.is_memory() {
        // the manager's entry among the waiters is withdrawn in the background
        let record = "{tower-lock:cancel}:w";
        let gone = support::eventually(Duration::from_secs(5), || {
            fx.cmd_for(record, &["EXISTS", record])
                .and_then(|r| r.as_int())
                == Some(0)
        })
        .await;
        assert!(gone, "the waiter record was left behind");
    }
    held.release().await.unwrap();
    assert!(other
        .try_acquire("cancel", &LockOptions::exclusive())
        .await
        .unwrap()
        .is_some());
}

async fn cancelled_waiter_passes_its_wake_up_on(fx: Fixture) {
    // many waiters time out while the lock changes hands: nobody may be left sleeping
    let m = fx.manager().await;
    let other = fx.manager().await;
    let acquired = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for i in 0..30 {
        let mgr = if i % 2 == 0 { m.clone() } else { other.clone() };
        let acquired = acquired.clone();
        tasks.push(tokio::spawn(async move {
            let timeout = if i % 3 == 0 { 5 } else { 20_000 };
            let opts = LockOptions::exclusive().wait_timeout(Duration::from_millis(timeout));
            if let Ok(g) = mgr.acquire("pass", &opts).await {
                tokio::time::sleep(Duration::from_millis(2)).await;
                acquired.fetch_add(1, Ordering::SeqCst);
                g.release().await.unwrap();
            }
        }));
    }
    let started = Instant::now();
    for t in tasks {
        t.await.unwrap();
    }
    assert!(
        acquired.load(Ordering::SeqCst) >= 20,
        "every patient waiter got the lock"
    );
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "a waiter slept until expiry"
    );
}

async fn invalid_keys_are_rejected(fx: Fixture) {
    let m = fx.manager().await;
    let err = m.acquire("", &LockOptions::exclusive()).await.unwrap_err();
    assert!(
        matches!(err, LockError::InvalidKey(KeyError::Empty)),
        "{err:?}"
    );
    let long = "k".repeat(tower_lock::key::MAX_KEY_LEN + 1);
    let err = m
        .try_acquire(&long, &LockOptions::exclusive())
        .await
        .unwrap_err();
    assert!(
        matches!(err, LockError::InvalidKey(KeyError::TooLong { .. })),
        "{err:?}"
    );
    // awkward but valid names work and stay apart
    let a = m.acquire("a:{b}", &LockOptions::exclusive()).await.unwrap();
    let b = m
        .try_acquire("a%3A%7Bb%7D", &LockOptions::exclusive())
        .await
        .unwrap();
    assert!(b.is_some(), "an escaped-looking name is a different lock");
    drop(a);
}

/// Requests waiting in the managers of this fixture.
fn waiting_total(fx: &Fixture, m: &LockManager) -> usize {
    if fx.is_memory() {
        return m.waiting();
    }
    let nodes = fx.data_nodes();
    let records = nodes.iter().map(|node| node.cmd(&["KEYS", "*:w"]));
    records
        .map(|keys| keys.as_array().map_or(0, <[_]>::len))
        .sum()
}
