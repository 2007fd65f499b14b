//! Quorum locks (RedLock) against 3 and 5 real redis-server processes: mutual exclusion, re-entry,
//! renewal and loss, cancellation, no polling, and the refusal of fair locks. Masters failing:
//! `faults.rs`; what the fencing tokens promise: `tokens.rs`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tower_lock::{LockError, LockManager, LockOptions};

use crate::support::eventually;
use crate::support::masters::Masters;

/// Many tasks of two managers take one lock in turn: never two inside at once, and the tokens seen
/// inside rise strictly (the masters share one clock here).
async fn mutual_exclusion(n: usize) {
    let masters = Masters::start(n);
    let managers = [
        masters.manager(Duration::from_secs(30)).await,
        masters.manager(Duration::from_secs(30)).await,
    ];
    let inside = Arc::new(AtomicUsize::new(0));
    let max_inside = Arc::new(AtomicUsize::new(0));
    let tokens = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for t in 0..16 {
        let m = managers[t % 2].clone();
        let (inside, max_inside, tokens) = (inside.clone(), max_inside.clone(), tokens.clone());
        tasks.push(tokio::spawn(async move {
            for _ in 0..8 {
                let opts = LockOptions::exclusive().wait_timeout(Duration::from_secs(20));
                let guard = m.acquire("acct", &opts).await.expect("acquire");
                let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                max_inside.fetch_max(now, Ordering::SeqCst);
                tokens.lock().unwrap().push(guard.fencing_token());
                tokio::task::yield_now().await;
                inside.fetch_sub(1, Ordering::SeqCst);
                guard.release().await.expect("release");
            }
        }));
    }
    for t in tasks {
        t.await.expect("task");
    }
    assert_eq!(max_inside.load(Ordering::SeqCst), 1, "two holders at once");
    let tokens = tokens.lock().unwrap().clone();
    assert_eq!(tokens.len(), 128);
    assert!(
        tokens.windows(2).all(|w| w[1] > w[0]),
        "tokens did not rise: {tokens:?}"
    );
    for server in &masters.servers {
        assert_eq!(
            server.pubsub_clients(),
            2,
            "one inbox per manager per master"
        );
    }
    // nothing is left behind on any master once every guard is released
    assert!(eventually(Duration::from_secs(5), || masters.holding("acct") == 0).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutual_exclusion_across_two_managers_on_3_masters() {
    mutual_exclusion(3).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutual_exclusion_across_two_managers_on_5_masters() {
    mutual_exclusion(5).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reentry_renewal_on_every_master_and_loss_when_a_majority_is_gone() {
    let masters = Masters::start(3);
    let lease = Duration::from_millis(300);
    let m = masters.manager(lease).await;
    let other = masters.manager(lease).await;
    let opts = LockOptions::exclusive();
    let owner = m.owner();
    let g1 = owner.acquire("re", &opts).await.unwrap();
    // a majority decided the acquisition; the third grant may land after, and the other
    // manager's attempt below must not reach that master first (it would hold 2 of 3, rightly)
    assert!(eventually(Duration::from_secs(5), || masters.holding("re") == 3).await);
    let g2 = owner.acquire("re", &opts).await.unwrap();
    assert_eq!(
        g1.fencing_token(),
        g2.fencing_token(),
        "re-entry keeps the token"
    );
    assert!(other.try_acquire("re", &opts).await.unwrap().is_none());
    g2.release().await.unwrap();
    assert!(
        other.try_acquire("re", &opts).await.unwrap().is_none(),
        "one hold is left"
    );
    // only renewal on the masters keeps it alive for several leases
    tokio::time::sleep(lease * 4).await;
    assert!(!g1.is_lost());
    assert_eq!(masters.holding("re"), 3, "renewed on every master");
    // one master loses it: a majority still renews it
    masters.servers[0].cmd(&["DEL", "{tower-lock:re}"]);
    tokio::time::sleep(lease * 2).await;
    assert!(!g1.is_lost(), "a majority still holds it");
    // a second master loses it: a majority answered, and a majority no longer holds it
    masters.servers[1].cmd(&["DEL", "{tower-lock:re}"]);
    tokio::time::timeout(Duration::from_secs(3), g1.lost())
        .await
        .expect("lost() fires at the next renewal");
    let err = g1.release().await.unwrap_err();
    assert!(
        matches!(err, LockError::NotHeld { ref key } if key == "re"),
        "{err:?}"
    );
    assert_eq!(m.held(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_watchdog_renews_every_lock_on_every_master_in_batches() {
    let masters = Masters::start(3);
    let lease = Duration::from_millis(300);
    let m = masters.manager(lease).await;
    let mut guards = Vec::new();
    for i in 0..100 {
        guards.push(
            m.acquire(&format!("many{i}"), &LockOptions::exclusive())
                .await
                .unwrap(),
        );
    }
    let before: Vec<u64> = masters
        .servers
        .iter()
        .map(|s| s.command_calls("evalsha"))
        .collect();
    tokio::time::sleep(lease).await;
    for (server, before) in masters.servers.iter().zip(before) {
        // renewed every lease/3: 3 batched calls per lease on each master, not 100
        let calls = server.command_calls("evalsha") - before;
        assert!(
            calls <= 4,
            "{calls} renewal calls in one lease period for 100 locks"
        );
    }
    tokio::time::sleep(lease * 2).await;
    assert!(guards.iter().all(|g| !g.is_lost()));
    drop(guards);
    assert!(
        eventually(Duration::from_secs(5), || {
            (0..100).all(|i| masters.holding(&format!("many{i}")) == 0)
        })
        .await
    );
    assert_eq!(m.held(), 0);
    let before = masters.evalsha_total();
    tokio::time::sleep(lease * 2).await;
    assert_eq!(
        masters.evalsha_total(),
        before,
        "nothing renewed after release"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelled_attempts_and_waiters_leave_nothing_behind() {
    let masters = Masters::start(3);
    let m = LockManager::builder()
        .quorum(masters.urls())
        .node_timeout(Duration::from_secs(2))
        .build()
        .await
        .unwrap();
    let other = masters.manager(Duration::from_secs(30)).await;
    // warm the lock's connections, so that its next commands reach the frozen masters' sockets
    m.acquire("inflight", &LockOptions::exclusive())
        .await
        .unwrap()
        .release()
        .await
        .unwrap();
    // an attempt in flight (two masters frozen) is abandoned by its caller
    masters.servers[0].stop_process();
    masters.servers[1].stop_process();
    let attempt = tokio::spawn({
        let m = m.clone();
        async move {
            m.acquire("inflight", &LockOptions::exclusive())
                .await
                .map(drop)
        }
    });
    assert!(
        eventually(Duration::from_secs(5), || masters.servers[2]
            .cmd(&["EXISTS", "{tower-lock:inflight}"])
            .as_int()
            == Some(1))
        .await
    );
    attempt.abort();
    assert!(attempt.await.unwrap_err().is_cancelled());
    masters.servers[0].continue_process();
    masters.servers[1].continue_process();
    // it is finished in the background and, since nobody wants it, released everywhere
    assert!(
        eventually(Duration::from_secs(5), || masters.holding("inflight") == 0).await,
        "an abandoned attempt left the lock behind"
    );
    assert_eq!(m.held(), 0);
    assert!(other
        .try_acquire("inflight", &LockOptions::exclusive())
        .await
        .unwrap()
        .is_some());

    // a waiter that goes away withdraws from every master
    let held = other
        .acquire("w1", &LockOptions::exclusive())
        .await
        .unwrap();
    let waiting = tokio::spawn({
        let m = m.clone();
        async move { m.acquire("w1", &LockOptions::exclusive()).await.map(drop) }
    });
    // recorded as waiting on the masters where it found the lock held (at least a majority)
    assert!(
        eventually(Duration::from_secs(5), || masters
            .servers
            .iter()
            .filter(|s| s.cmd(&["EXISTS", "{tower-lock:w1}:w"]).as_int() == Some(1))
            .count()
            >= 2)
        .await
    );
    waiting.abort();
    assert!(waiting.await.unwrap_err().is_cancelled());
    assert_eq!(m.waiting(), 0);
    assert!(
        eventually(Duration::from_secs(5), || masters
            .servers
            .iter()
            .all(
                |s| s.cmd(&["EXISTS", "{tower-lock:w1}:w"]).as_int() == Some(0)
            ))
        .await
    );
    drop(held);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_are_woken_by_a_release_on_any_master_without_polling() {
    let masters = Masters::start(3);
    // a node timeout no loaded test machine reaches: a timed-out attempt is undone, which is a
    // command, and this test counts commands. Takeover off: its holder probes and inbox PINGs
    // cost a few commands per manager per second, whatever the number of waiters (counted in
    // tests/takeover/quorum.rs), and this counts what the waiters cost.
    let patient = || {
        LockManager::builder()
            .quorum(masters.urls())
            .node_timeout(Duration::from_secs(10))
            .no_takeover()
            .build()
    };
    let holder = patient().await.unwrap();
    let m = patient().await.unwrap();
    let held = holder
        .acquire("hot", &LockOptions::exclusive())
        .await
        .unwrap();
    // held on every master (a majority decided the acquisition; the third grant may land after)
    assert!(eventually(Duration::from_secs(5), || masters.holding("hot") == 3).await);
    let acquired = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for _ in 0..50 {
        let (m, acquired) = (m.clone(), acquired.clone());
        tasks.push(tokio::spawn(async move {
            let opts = LockOptions::exclusive().wait_timeout(Duration::from_secs(20));
            let g = m.acquire("hot", &opts).await.expect("acquire");
            acquired.fetch_add(1, Ordering::SeqCst);
            g.release().await.expect("release");
        }));
    }
    // every waiter made its one attempt on every master, then went quiet
    assert!(
        eventually(Duration::from_secs(10), || {
            masters
                .servers
                .iter()
                .all(|s| s.command_calls("evalsha") >= 51)
        })
        .await
    );
    assert_eq!(m.waiting(), 50);
    let before: Vec<u64> = masters.servers.iter().map(|s| s.total_commands()).collect();
    tokio::time::sleep(Duration::from_secs(1)).await;
    for (server, before) in masters.servers.iter().zip(before) {
        // the INFO calls of this check itself
        let during = server.total_commands() - before;
        assert!(during <= 2, "{during} commands while 50 requests waited");
    }
    let released = Instant::now();
    held.release().await.unwrap();
    for t in tasks {
        t.await.unwrap();
    }
    assert_eq!(acquired.load(Ordering::SeqCst), 50);
    // the holder's lease is 30 s: only wake-ups can explain this
    assert!(
        released.elapsed() < Duration::from_secs(10),
        "{:?}",
        released.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fair_and_shared_locks_are_refused_and_bad_quorums_do_not_build() {
    let mut masters = Masters::start(3);
    let m = masters.manager(Duration::from_secs(30)).await;
    let err = m.acquire("fair", &LockOptions::fair()).await.unwrap_err();
    assert!(
        matches!(err, LockError::Unsupported { ref key, .. } if key == "fair"),
        "{err:?}"
    );
    let err = m
        .owner()
        .try_acquire("fair", &LockOptions::fair())
        .await
        .unwrap_err();
    assert!(matches!(err, LockError::Unsupported { .. }), "{err:?}");
    for shared in [
        LockOptions::read(),
        LockOptions::write(),
        LockOptions::semaphore(3),
    ] {
        let err = m.try_acquire("fair", &shared).await.unwrap_err();
        assert!(
            matches!(&err, LockError::Unsupported { what, .. } if what.contains("semaphore")),
            "{err:?}"
        );
    }
    assert_eq!(masters.holding("fair"), 0, "nothing was written");
    drop(m);

    let two = LockManager::quorum(masters.urls().into_iter().take(2))
        .await
        .unwrap_err();
    assert!(matches!(two, LockError::Config(_)), "{two:?}");
    let url = masters.servers[0].url();
    let dup = LockManager::quorum([url.clone(), url.clone(), masters.servers[1].url()])
        .await
        .unwrap_err();
    assert!(matches!(dup, LockError::Config(_)), "{dup:?}");

    // a minority down at start: it builds, and the missing inbox subscribes once the master is up
    masters.servers[2].kill();
    let late = masters.manager(Duration::from_secs(30)).await;
    late.acquire("late", &LockOptions::exclusive())
        .await
        .unwrap()
        .release()
        .await
        .unwrap();
    masters.servers[2].restart();
    assert!(
        eventually(Duration::from_secs(10), || masters.servers[2]
            .pubsub_clients()
            == 1)
        .await
    );
    // a majority down at start: unavailable
    masters.servers[1].kill();
    masters.servers[2].kill();
    let err = LockManager::quorum(masters.urls()).await.unwrap_err();
    assert!(err.is_unavailable(), "{err:?}");
}

/// A quorum manager that shuts down releases its lock on every master: another manager takes it
/// with one attempt, and every master's inbox of the closed manager is gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shut_down_quorum_manager_frees_its_locks_at_once() {
    let masters = Masters::start(3);
    let leaving = masters.manager(Duration::from_secs(60)).await;
    let staying = masters.manager(Duration::from_secs(60)).await;
    let guard = leaving
        .acquire("acct", &LockOptions::exclusive())
        .await
        .unwrap();
    leaving.shutdown().await.expect("shutdown");
    assert!(guard.is_lost());
    let taken = staying.try_acquire("acct", &LockOptions::exclusive()).await;
    assert!(taken.unwrap().is_some(), "the lock outlived the shutdown");
    let refused = leaving.try_acquire("acct", &LockOptions::exclusive()).await;
    assert!(matches!(refused, Err(LockError::Closed)), "{refused:?}");
    for server in &masters.servers {
        let one_inbox_left = || server.pubsub_clients() == 1;
        assert!(eventually(Duration::from_secs(5), one_inbox_left).await);
    }
}
