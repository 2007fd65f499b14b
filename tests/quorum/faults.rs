//! Quorum locks (RedLock) while masters fail: a minority or a majority killed and restarted, a
//! frozen master, a quorum reached too late, and busy versus down.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tower_lock::{LockManager, LockOptions};

use crate::support::masters::{Masters, NODE_TIMEOUT};
use crate::support::{eventually, GENEROUS};

/// SIGKILL a minority: held locks stay held, new ones still exclude each other.
async fn minority_killed(n: usize) {
    let mut masters = Masters::start(n);
    let lease = Duration::from_millis(600);
    let m = masters.manager(lease).await;
    let other = masters.manager(lease).await;
    let held = m.acquire("held", &LockOptions::exclusive()).await.unwrap();
    for server in masters.servers.iter_mut().take((n - 1) / 2) {
        server.kill();
    }
    tokio::time::sleep(lease * 3).await;
    assert!(!held.is_lost(), "a majority keeps renewing it");
    let busy = other.try_acquire("held", &LockOptions::exclusive()).await;
    assert!(matches!(busy, Ok(None)), "busy, not down: {busy:?}");
    let inside = Arc::new(AtomicUsize::new(0));
    let max_inside = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for t in 0..8 {
        let mgr = if t % 2 == 0 { m.clone() } else { other.clone() };
        let (inside, max_inside) = (inside.clone(), max_inside.clone());
        tasks.push(tokio::spawn(async move {
            for _ in 0..5 {
                let opts = LockOptions::exclusive().wait_timeout(Duration::from_secs(20));
                let g = mgr.acquire("shared", &opts).await.expect("acquire");
                max_inside.fetch_max(inside.fetch_add(1, Ordering::SeqCst) + 1, Ordering::SeqCst);
                tokio::task::yield_now().await;
                inside.fetch_sub(1, Ordering::SeqCst);
                g.release().await.expect("release");
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    assert_eq!(max_inside.load(Ordering::SeqCst), 1);
    held.release().await.expect("released on the majority");
    let g = other
        .try_acquire("held", &LockOptions::exclusive())
        .await
        .unwrap();
    assert!(g.is_some(), "free after release");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_a_minority_of_3_leaves_locks_working() {
    minority_killed(3).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_a_minority_of_5_leaves_locks_working() {
    minority_killed(5).await;
}

/// SIGKILL a majority: every acquisition fails within its wait timeout (no hang), held leases are
/// lost, and everything works again once the masters are back.
async fn majority_killed_then_restarted(n: usize) {
    let mut masters = Masters::start(n);
    let lease = Duration::from_millis(600);
    let m = masters.manager(lease).await;
    let other = masters.manager(lease).await;
    let held = m.acquire("gone", &LockOptions::exclusive()).await.unwrap();
    let waiter = tokio::spawn({
        let other = other.clone();
        async move {
            let opts = LockOptions::exclusive().wait_timeout(Duration::from_secs(3));
            let started = Instant::now();
            let result = other.acquire("gone", &opts).await.map(drop);
            (result, started.elapsed())
        }
    });
    assert!(
        eventually(GENEROUS, || other.waiting() == 1).await,
        "the waiter waits"
    );
    for server in masters.servers.iter_mut().take(n / 2 + 1) {
        server.kill();
    }
    // one attempt takes at most the node timeout, well within the wait timeout: an error, at once
    let opts = LockOptions::exclusive().wait_timeout(NODE_TIMEOUT * 3);
    let started = Instant::now();
    let err = m.acquire("fresh", &opts).await.unwrap_err();
    assert!(err.is_unavailable(), "{err:?}");
    assert_eq!(err.key(), Some("fresh"));
    let took = started.elapsed();
    assert!(took < NODE_TIMEOUT * 2, "took {took:?}");
    let started = Instant::now();
    let err = m.try_acquire("fresh", &opts).await.unwrap_err();
    assert!(err.is_unavailable(), "down, not busy: {err:?}");
    let took = started.elapsed();
    assert!(took < NODE_TIMEOUT * 2, "took {took:?}");
    let (result, waited) = waiter.await.unwrap();
    assert!(result.is_err(), "{result:?}");
    assert!(
        waited < Duration::from_secs(4),
        "the waiter hung for {waited:?}"
    );
    tokio::time::timeout(Duration::from_secs(3), held.lost())
        .await
        .expect("a lease a majority cannot renew is lost");
    drop(held);

    for server in masters.servers.iter_mut().take(n / 2 + 1) {
        server.restart();
    }
    let opts = LockOptions::exclusive().wait_timeout(Duration::from_secs(10));
    let recovered = async {
        loop {
            if let Ok(g) = m.acquire("gone", &opts).await {
                return g;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    let g = tokio::time::timeout(Duration::from_secs(10), recovered)
        .await
        .expect("recovers after the restart");
    assert!(other
        .try_acquire("gone", &LockOptions::exclusive())
        .await
        .unwrap()
        .is_none());
    let waiter = tokio::spawn(async move { other.acquire("gone", &opts).await.map(drop) });
    g.release().await.unwrap();
    waiter
        .await
        .unwrap()
        .expect("a waiter is woken again after the restart");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_a_majority_of_3_fails_fast_and_restart_recovers() {
    majority_killed_then_restarted(3).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_a_majority_of_5_fails_fast_and_restart_recovers() {
    majority_killed_then_restarted(5).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_master_does_not_hold_acquisitions_up() {
    let masters = Masters::start(3);
    let lease = Duration::from_millis(500);
    let m = masters.manager(lease).await;
    let other = masters.manager(lease).await;
    m.acquire("ice", &LockOptions::exclusive())
        .await
        .unwrap()
        .release()
        .await
        .unwrap();
    let kept = m.acquire("kept", &LockOptions::exclusive()).await.unwrap();
    masters.servers[2].stop_process();
    let mut slowest = Duration::ZERO;
    for i in 0..20 {
        let mgr = if i % 2 == 0 { &m } else { &other };
        let started = Instant::now();
        let g = mgr
            .acquire("ice", &LockOptions::exclusive())
            .await
            .expect("acquire");
        let shut_out = if i % 2 == 0 { &other } else { &m };
        assert!(shut_out
            .try_acquire("ice", &LockOptions::exclusive())
            .await
            .unwrap()
            .is_none());
        g.release().await.expect("release");
        slowest = slowest.max(started.elapsed());
    }
    // renewals do not wait for the frozen master either (its timeout is longer than the lease)
    tokio::time::sleep(lease * 3).await;
    assert!(!kept.is_lost(), "a lease was lost while a majority was up");
    assert!(other
        .try_acquire("kept", &LockOptions::exclusive())
        .await
        .unwrap()
        .is_none());
    masters.servers[2].continue_process();
    kept.release().await.unwrap();
    assert!(
        slowest < NODE_TIMEOUT,
        "an acquisition waited {slowest:?} for the frozen master: the others decide without it"
    );
    // what reached the frozen master runs when it wakes; anything it granted runs out
    assert!(eventually(Duration::from_secs(5), || masters.holding("ice") == 0).await);
    let g = m.acquire("ice", &LockOptions::exclusive()).await.unwrap();
    assert!(eventually(Duration::from_secs(5), || masters.holding("ice") == 3).await);
    drop(g);
}

/// A master that answers an acquisition after its hold was released must not keep the lock from
/// the next holder: the release's drop goes to it behind the acquisition. Otherwise, with another
/// master frozen, the next acquisition finds one master won and one busy, and waits out the frozen
/// one's node timeout (and a pause after it) before it tries again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_grant_of_a_released_hold_does_not_hold_the_next_one_up() {
    let masters = Masters::start(3);
    let lease = Duration::from_millis(500);
    let m = masters.manager(lease).await;
    // every connection open, so that only the late answer is slow
    let warm = m.acquire("warm", &LockOptions::exclusive()).await.unwrap();
    warm.release().await.unwrap();
    masters.servers[1].stop_process();
    // masters 0 and 2 decide; master 1 runs the acquisition when it wakes, after the release
    let g = m.acquire("ice", &LockOptions::exclusive()).await.unwrap();
    g.release().await.unwrap();
    masters.servers[2].stop_process();
    let started = Instant::now();
    let acquiring = tokio::spawn({
        let m = m.clone();
        async move { m.acquire("ice", &LockOptions::exclusive()).await.map(drop) }
    });
    // the acquisition waits on master 1 behind the first one
    tokio::time::sleep(Duration::from_millis(20)).await;
    masters.servers[1].continue_process();
    acquiring.await.unwrap().expect("acquire");
    let took = started.elapsed();
    masters.servers[2].continue_process();
    assert!(
        took < NODE_TIMEOUT,
        "the acquisition took {took:?}: the late grant on master 1 kept the lock"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quorum_reached_after_the_lease_is_undone_everywhere() {
    let masters = Masters::start(3);
    let m = LockManager::builder()
        .quorum(masters.urls())
        .node_timeout(Duration::from_secs(2))
        .build()
        .await
        .unwrap();
    m.acquire("late", &LockOptions::exclusive())
        .await
        .unwrap()
        .release()
        .await
        .unwrap();
    // two masters answer only after 1.2 s: a majority grants a 1 s lease too late
    masters.servers[0].stop_process();
    masters.servers[1].stop_process();
    let attempt = tokio::spawn({
        let m = m.clone();
        async move {
            let started = Instant::now();
            let opts = LockOptions::exclusive().lease(Duration::from_secs(1));
            let got = m.try_acquire("late", &opts).await.map(|g| g.is_some());
            (got, started.elapsed())
        }
    });
    tokio::time::sleep(Duration::from_millis(1200)).await; // the length of the fault
    masters.servers[0].continue_process();
    masters.servers[1].continue_process();
    let (got, elapsed) = attempt.await.unwrap();
    assert!(
        matches!(got, Ok(false)),
        "an expired quorum is busy, not held: {got:?}"
    );
    assert!(elapsed >= Duration::from_millis(1200));
    // the late grants would live another second: they must be undone, not left to expire
    assert!(
        eventually(Duration::from_millis(500), || masters.holding("late") == 0).await,
        "the late grants were not released"
    );
    let g = m
        .try_acquire("late", &LockOptions::exclusive())
        .await
        .unwrap();
    assert!(g.is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn busy_needs_a_majority_of_answers_down_is_an_error() {
    let mut masters = Masters::start(3);
    let m = masters.manager(Duration::from_secs(30)).await;
    let opts = LockOptions::exclusive();
    // held elsewhere on one master: the other two make a majority
    masters.foreign_hold(0, "one", Duration::from_secs(30));
    let g = m.try_acquire("one", &opts).await.unwrap().expect("2 of 3");
    assert_eq!(
        masters.holding("one"),
        3,
        "the foreign holder and ours on two"
    );
    g.release().await.unwrap();
    // held elsewhere on two: busy, and what we took on the third is released
    masters.foreign_hold(0, "two", Duration::from_secs(30));
    masters.foreign_hold(1, "two", Duration::from_secs(30));
    assert!(m.try_acquire("two", &opts).await.unwrap().is_none());
    let lock = "{tower-lock:two}";
    assert!(
        eventually(Duration::from_secs(2), || {
            masters.servers[2].cmd(&["EXISTS", lock]).as_int() == Some(0)
        })
        .await
    );
    // a waiter never sleeps past the first busy master's holder: short foreign holds run out
    masters.foreign_hold(0, "short", Duration::from_millis(300));
    masters.foreign_hold(1, "short", Duration::from_millis(400));
    let started = Instant::now();
    let g = m
        .acquire("short", &opts.wait_timeout(Duration::from_secs(5)))
        .await
        .expect("acquired once the holders expired");
    assert!(started.elapsed() >= Duration::from_millis(250));
    drop(g);
    // one master down, two busy: still busy (a majority answered)
    masters.servers[2].kill();
    assert!(m.try_acquire("two", &opts).await.unwrap().is_none());
    // two masters down, the one left says busy: down (no majority answered)
    masters.servers[1].kill();
    let err = m.try_acquire("two", &opts).await.unwrap_err();
    assert!(err.is_unavailable(), "{err:?}");
    let text = err.to_string();
    // decided as soon as two masters failed, maybe before the third answered
    assert!(
        text.contains("of 3 Redis masters answered; a quorum needs 2"),
        "{text}"
    );
}
