//! What one set of locks promises: lock order whatever order is given, every lock or none, one
//! wait for all, its own token per lock, re-entry, cancellation, and bad input refused before any
//! lock is taken.

use std::time::{Duration, Instant};

use tower_lock::{KeyError, LockError, LockManager, LockOptions, LockOwner};

use crate::on_both_backends;
use crate::support::fixture::Fixture;
use crate::support::masters::Masters;
use crate::support::GENEROUS;

/// Whether `key` can be taken by a fresh owner now (released again before this returns).
async fn is_free(manager: &LockManager, key: &str) -> bool {
    let opts = LockOptions::exclusive();
    match manager.try_acquire(key, &opts).await.expect("try_acquire") {
        Some(guard) => {
            guard.release().await.expect("release the probe");
            true
        }
        None => false,
    }
}

/// Wait until `key` is free (a release in flight lands), up to a generous bound.
async fn becomes_free(manager: &LockManager, key: &str) -> bool {
    let deadline = Instant::now() + GENEROUS;
    while Instant::now() < deadline {
        if is_free(manager, key).await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    false
}

async fn takes_every_lock_in_lock_order_each_with_its_token(fixture: Fixture) {
    let manager = fixture.manager().await;
    let other = fixture.manager().await;
    let opts = LockOptions::exclusive().wait_timeout(GENEROUS);
    let owner = manager.owner();
    let all = owner
        .acquire_all(["set:c", "set:a", "set:b", "set:a"], &opts)
        .await
        .expect("acquire_all");
    assert_eq!(all.keys().collect::<Vec<_>>(), ["set:a", "set:b", "set:c"]);
    for key in ["set:a", "set:b", "set:c"] {
        let guard = all.get(key).expect("a guard per key");
        assert_eq!(all.fencing_token(key), Some(guard.fencing_token()));
        assert!(!is_free(&other, key).await, "{key} is held");
    }
    assert_eq!(all.get("set:d").map(|g| g.key().to_owned()), None);
    // on a cluster the set spans masters: each lock lives in its own slot
    let nodes = fixture.data_nodes();
    let holding = nodes
        .iter()
        .filter(|n| n.cmd(&["DBSIZE"]).as_int() > Some(0));
    assert!(
        nodes.len() < 2 || holding.count() >= 2,
        "one master holds every lock"
    );
    assert!(!all.is_lost());
    let tokens: Vec<u64> = all.iter().map(|g| g.fencing_token()).collect();
    all.release().await.expect("release all");
    for key in ["set:a", "set:b", "set:c"] {
        assert!(becomes_free(&other, key).await, "{key} released");
    }
    // the next holder of each lock gets a higher token than the set had
    let again = other
        .owner()
        .acquire_all(["set:a", "set:b", "set:c"], &opts)
        .await
        .expect("again");
    let later: Vec<u64> = again.iter().map(|g| g.fencing_token()).collect();
    assert!(
        later.iter().zip(&tokens).all(|(l, t)| l > t),
        "{later:?} after {tokens:?}"
    );
}

async fn takes_none_when_one_lock_is_busy(fixture: Fixture) {
    let manager = fixture.manager().await;
    let holder = fixture.manager().await;
    let busy = holder
        .acquire("none:b", &LockOptions::exclusive())
        .await
        .expect("hold b");
    let owner = manager.owner();
    let keys = ["none:c", "none:b", "none:a"];
    let tried = owner.try_acquire_all(keys, &LockOptions::exclusive()).await;
    assert!(tried.expect("try_acquire_all").is_none(), "b is busy");
    assert!(becomes_free(&holder, "none:a").await, "a given back");
    assert!(becomes_free(&holder, "none:c").await, "c never kept");

    let opts = LockOptions::exclusive().wait_timeout(Duration::from_millis(300));
    let started = Instant::now();
    match owner.acquire_all(keys, &opts).await {
        Err(LockError::Timeout { key, waited }) => {
            assert_eq!(key, "none:b", "the lock that stayed busy");
            assert!(waited >= Duration::from_millis(300), "waited {waited:?}");
            assert!(started.elapsed() < GENEROUS);
        }
        other => panic!("expected a timeout on none:b, got {other:?}"),
    }
    assert!(
        becomes_free(&holder, "none:a").await,
        "a released after the timeout"
    );
    assert_eq!(manager.waiting(), 0, "no waiter left behind");
    busy.release().await.expect("release b");
    let all = owner.try_acquire_all(keys, &opts).await.expect("try again");
    assert_eq!(all.expect("every lock free now").iter().count(), 3);
}

async fn one_wait_timeout_counts_for_the_whole_set(fixture: Fixture) {
    let manager = fixture.manager().await;
    let holder = fixture.manager().await;
    let first = holder
        .acquire("wait:a", &LockOptions::exclusive())
        .await
        .expect("hold a");
    let _last = holder
        .acquire("wait:b", &LockOptions::exclusive())
        .await
        .expect("hold b");
    let freeing = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(1500)).await;
        first.release().await.expect("release a");
    });
    // a is freed after 1.5 s of a 2 s wait; b never is. One timeout for both ends the wait at
    // 2 s; a timeout per lock would wait 3.5 s.
    let opts = LockOptions::exclusive().wait_timeout(Duration::from_secs(2));
    let started = Instant::now();
    let refused = manager
        .owner()
        .acquire_all(["wait:b", "wait:a"], &opts)
        .await;
    let waited = started.elapsed();
    assert!(matches!(refused, Err(LockError::Timeout { ref key, .. }) if key == "wait:b"));
    assert!(waited >= Duration::from_secs(2), "waited {waited:?}");
    assert!(
        waited < Duration::from_millis(3200),
        "waited {waited:?}: a timeout per lock"
    );
    freeing.await.expect("task");
    assert!(becomes_free(&holder, "wait:a").await, "a given back");
}

async fn re_enters_locks_the_owner_holds(fixture: Fixture) {
    let manager = fixture.manager().await;
    let other = fixture.manager().await;
    let owner = manager.owner();
    let opts = LockOptions::exclusive().wait_timeout(GENEROUS);
    let held = owner.acquire("again:a", &opts).await.expect("hold a");
    let all = owner
        .acquire_all(["again:b", "again:a"], &opts)
        .await
        .expect("re-enter a, take b");
    assert_eq!(all.fencing_token("again:a"), Some(held.fencing_token()));
    all.release().await.expect("release the set");
    // the set released its own hold of a: the first hold keeps it
    assert!(becomes_free(&other, "again:b").await, "b released");
    assert!(!is_free(&other, "again:a").await, "a still held once");
    held.release().await.expect("release a");
    assert!(becomes_free(&other, "again:a").await, "a released");
}

async fn a_dropped_wait_leaves_nothing_behind(fixture: Fixture) {
    let manager = fixture.manager().await;
    let holder = fixture.manager().await;
    let busy = holder
        .acquire("drop:b", &LockOptions::exclusive())
        .await
        .expect("hold b");
    let owner = manager.owner();
    let waiting = tokio::spawn(async move {
        let keys = ["drop:b", "drop:a"];
        owner.acquire_all(keys, &LockOptions::exclusive()).await
    });
    // the set holds a and waits for b
    let deadline = Instant::now() + GENEROUS;
    while is_free(&holder, "drop:a").await || manager.waiting() == 0 {
        assert!(
            Instant::now() < deadline,
            "the set never took a and waited for b"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    waiting.abort();
    assert!(waiting.await.is_err(), "cancelled");
    assert!(
        becomes_free(&holder, "drop:a").await,
        "a released by the dropped wait"
    );
    busy.release().await.expect("release b");
    assert!(
        becomes_free(&holder, "drop:b").await,
        "b not taken by the dropped wait"
    );
    assert_eq!(manager.waiting(), 0);
}

async fn refuses_bad_sets_before_taking_any_lock(fixture: Fixture) {
    let manager = fixture.manager().await;
    let owner = manager.owner();
    let opts = LockOptions::exclusive();
    let empty: [&str; 0] = [];
    let refused = owner.acquire_all(empty, &opts).await;
    assert!(matches!(
        refused,
        Err(LockError::InvalidKey(KeyError::NoKeys))
    ));
    let refused = owner.try_acquire_all(Vec::<String>::new(), &opts).await;
    assert!(matches!(
        refused,
        Err(LockError::InvalidKey(KeyError::NoKeys))
    ));
    let refused = owner.acquire_all(["bad:a", ""], &opts).await;
    assert!(matches!(
        refused,
        Err(LockError::InvalidKey(KeyError::Empty))
    ));
    let long = "x".repeat(tower_lock::key::MAX_KEY_LEN + 1);
    let refused = owner.try_acquire_all(["bad:a", long.as_str()], &opts).await;
    assert!(matches!(
        refused,
        Err(LockError::InvalidKey(KeyError::TooLong { .. }))
    ));
    assert!(is_free(&manager, "bad:a").await, "nothing taken");
    let refused = owner
        .acquire_all(["bad:a"], &opts.max_hold(Duration::ZERO))
        .await;
    assert!(matches!(refused, Err(LockError::Unsupported { .. })));
    assert!(is_free(&manager, "bad:a").await, "nothing taken");
}

async fn extreme_waits_saturate(fixture: Fixture) {
    let manager = fixture.manager().await;
    let holder = fixture.manager().await;
    let owner = manager.owner();
    // a wait past the clock's end waits as long as it takes, without a panic
    let forever = LockOptions::exclusive().wait_timeout(Duration::MAX);
    let all = owner
        .acquire_all(["far:a", "far:b"], &forever)
        .await
        .expect("free locks");
    all.release().await.expect("release");
    // a zero wait is one attempt per lock
    let _busy = holder
        .acquire("far:b", &LockOptions::exclusive())
        .await
        .expect("hold b");
    let started = Instant::now();
    let zero = LockOptions::exclusive().wait_timeout(Duration::ZERO);
    let refused = owner.acquire_all(["far:b", "far:a"], &zero).await;
    assert!(matches!(refused, Err(LockError::Timeout { ref key, .. }) if key == "far:b"));
    assert!(started.elapsed() < GENEROUS, "a zero wait did not wait");
    assert!(becomes_free(&holder, "far:a").await, "a given back");
}

on_both_backends!(
    extreme_waits_saturate,
    takes_every_lock_in_lock_order_each_with_its_token,
    takes_none_when_one_lock_is_busy,
    one_wait_timeout_counts_for_the_whole_set,
    re_enters_locks_the_owner_holds,
    a_dropped_wait_leaves_nothing_behind,
    refuses_bad_sets_before_taking_any_lock,
);

/// A quorum takes each lock of a set on a majority of masters, refuses fair sets, and gives back the
/// locks of a set it could not complete.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quorum_sets_all_or_none() {
    let masters = Masters::start(3);
    let manager = masters.manager(Duration::from_secs(30)).await;
    let holder = masters.manager(Duration::from_secs(30)).await;
    let owner: LockOwner = manager.owner();
    let opts = LockOptions::exclusive().wait_timeout(GENEROUS);
    let all = owner
        .acquire_all(["qb", "qa"], &opts)
        .await
        .expect("acquire_all");
    // a quorum lock is held once a majority has it; the last master may still be answering
    assert!(masters.holding("qa") >= 2, "qa on a majority");
    assert!(masters.holding("qb") >= 2, "qb on a majority");
    all.release().await.expect("release");
    let refused = owner.acquire_all(["qa"], &LockOptions::fair()).await;
    assert!(matches!(refused, Err(LockError::Unsupported { .. })));

    let busy = holder.acquire("qb", &opts).await.expect("hold b");
    let tried = owner.try_acquire_all(["qa", "qb"], &opts).await;
    assert!(tried.expect("try_acquire_all").is_none());
    assert!(
        becomes_free(&holder, "qa").await,
        "a given back on every master"
    );
    busy.release().await.expect("release b");
}
