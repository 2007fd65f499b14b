//! Fair locks, on memory and on a real redis-server: FIFO order across managers, grants that never
//! get lost when waiters cancel, re-entry, fixed leases, and many queued waiters without polling.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tower_lock::{LockManager, LockOptions};

use crate::on_both_backends;
use crate::support;
use crate::support::fixture::Fixture;
use crate::support::{eventually, GENEROUS};

on_both_backends!(
    fifo_order_across_two_managers_and_no_queue_jumping,
    cancelled_waiter_leaves_the_queue_at_once,
    grant_racing_with_cancel_is_passed_on,
    fair_reentry_shares_the_token,
    fair_fixed_lease_frees_to_the_next_in_line,
);

/// Waiting requests across the fixture's managers: queued in Redis, or in memory behind a
/// request of their process (which keeps FIFO order: see `tests/safety/fifo_cohorts.rs`).
fn waiting(managers: &[LockManager]) -> usize {
    managers.iter().map(LockManager::waiting).sum()
}

/// The length of the Redis queue of the fair lock `key` (`None` in memory).
fn queue_length(fx: &Fixture, key: &str) -> Option<usize> {
    let queue = format!("{{tower-lock:{key}}}:ql");
    let length = fx.cmd_for(&queue, &["LLEN", &queue])?.as_int()?;
    usize::try_from(length).ok()
}

async fn fifo_order_across_two_managers_and_no_queue_jumping(fx: Fixture) {
    let managers = [fx.manager().await, fx.manager().await];
    let distinct = if !fx.is_memory() {
        &managers[..]
    } else {
        &managers[..1]
    };
    let holder = managers[0]
        .acquire("fifo", &LockOptions::fair())
        .await
        .unwrap();
    let order = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for i in 0..24 {
        let m = managers[i % 2].clone();
        let order = order.clone();
        tasks.push(tokio::spawn(async move {
            let opts = LockOptions::fair().wait_timeout(Duration::from_secs(30));
            let g = m.acquire("fifo", &opts).await.expect("fair acquire");
            order.lock().unwrap().push(i);
            tokio::time::sleep(Duration::from_millis(1)).await;
            g.release().await.unwrap();
        }));
        // queue them one after another: on Redis the first waits in memory behind the holder of
        // its process (nobody queued in Redis before it), and every later one in Redis's queue,
        // since a waiter of the other process queued before it; in memory each one in the lock's
        // queue (`waiting` counts a request from the moment it registers, before its first
        // attempt puts it in that queue; `queued` once that attempt found the lock busy)
        let queued = || match queue_length(&fx, "fifo") {
            Some(in_redis) => waiting(distinct) == i + 1 && in_redis == i,
            None => waiting(distinct) == i + 1 && queued_across(&fx, distinct) == i + 1,
        };
        assert!(eventually(GENEROUS, queued).await, "the waiter is queued");
    }
    // a try_acquire never jumps the queue, neither now nor while the queue drains
    let jumper = fx.manager().await;
    let jumped = Arc::new(AtomicUsize::new(0));
    let jumping = {
        let (jumper, jumped, order) = (jumper.clone(), jumped.clone(), order.clone());
        tokio::spawn(async move {
            while order.lock().unwrap().len() < 24 {
                if let Some(g) = jumper
                    .try_acquire("fifo", &LockOptions::fair())
                    .await
                    .unwrap()
                {
                    if order.lock().unwrap().len() < 24 {
                        jumped.fetch_add(1, Ordering::SeqCst);
                    }
                    drop(g);
                }
                tokio::task::yield_now().await;
            }
        })
    };
    holder.release().await.unwrap();
    for t in tasks {
        t.await.unwrap();
    }
    jumping.await.unwrap();
    assert_eq!(
        *order.lock().unwrap(),
        (0..24).collect::<Vec<_>>(),
        "not FIFO"
    );
    assert_eq!(
        jumped.load(Ordering::SeqCst),
        0,
        "try_acquire jumped the queue"
    );
}

/// Three waiters, each of its own process (on Redis) so that each queues in Redis; the second
/// is cancelled, and leaves the queue at once.
async fn cancelled_waiter_leaves_the_queue_at_once(fx: Fixture) {
    let m = fx.manager().await;
    let holder = m.acquire("c", &LockOptions::fair()).await.unwrap();
    let order = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    let mut waiters = Vec::new();
    for i in 0..3 {
        let waiter = fx.manager().await;
        let (m2, order) = (waiter.clone(), order.clone());
        tasks.push(tokio::spawn(async move {
            let g = m2.acquire("c", &LockOptions::fair()).await.unwrap();
            order.lock().unwrap().push(i);
            g.release().await.unwrap();
        }));
        waiters.push(waiter);
        let queued = || queued_across(&fx, &waiters) == i + 1;
        assert!(eventually(GENEROUS, queued).await, "queued");
    }
    tasks.remove(1).abort();
    assert!(
        eventually(GENEROUS, || queued_across(&fx, &waiters) == 2).await,
        "the cancelled waiter left"
    );
    if !fx.is_memory() {
        let queue = "{tower-lock:c}:ql";
        let left = support::eventually(Duration::from_secs(5), || {
            fx.cmd_for(queue, &["LLEN", queue]).and_then(|r| r.as_int()) == Some(2)
        })
        .await;
        assert!(left, "the cancelled waiter is still queued in Redis");
    }
    holder.release().await.unwrap();
    for t in tasks {
        t.await.unwrap();
    }
    assert_eq!(*order.lock().unwrap(), vec![0, 2]);
}

/// Requests of `managers` queued in the backend (in memory, all are the one manager).
fn queued_across(fx: &Fixture, managers: &[LockManager]) -> usize {
    let counts = managers.iter().map(LockManager::queued);
    if fx.is_memory() {
        counts.max().unwrap_or(0)
    } else {
        counts.sum()
    }
}

/// Requests of `managers` waiting for a lock, in the backend or in memory behind a request of
/// their process (in memory, both are the one manager).
fn waiting_in(fx: &Fixture, [a, b]: [&LockManager; 2]) -> usize {
    a.waiting() + if fx.is_memory() { 0 } else { b.waiting() }
}

/// `rounds` times: `a` holds `key` in mode `opts`; a waiter queues (in Redis, or in memory behind
/// a request of its process), then a patient one of `b`; the holder releases as the first waiter
/// is cancelled, just before or just after. The first waiter
/// is `b`'s in half the rounds (its grant goes out by message) and `a`'s in the other half (it
/// comes back in the release's answer): either way the patient waiter gets the lock.
pub(crate) async fn grants_race_with_cancels(
    fx: &Fixture,
    [a, b]: [&LockManager; 2],
    key: &'static str,
    opts: LockOptions,
    rounds: usize,
) {
    for round in 0..rounds {
        let holder = a.acquire(key, &opts).await.unwrap();
        let canceller = if round % 4 < 2 { b } else { a };
        let cancelled = {
            let m = canceller.clone();
            tokio::spawn(async move { m.acquire(key, &opts).await.map(drop) })
        };
        assert!(
            eventually(GENEROUS, || waiting_in(fx, [a, b]) >= 1).await,
            "first waiter queued"
        );
        let patient = {
            let (b, opts) = (b.clone(), opts.wait_timeout(Duration::from_secs(20)));
            tokio::spawn(async move { b.acquire(key, &opts).await.map(|g| g.fencing_token()) })
        };
        assert!(
            eventually(GENEROUS, || waiting_in(fx, [a, b]) >= 2).await,
            "second waiter queued"
        );
        // release and cancel the head at (nearly) the same moment
        let release = holder.release();
        if round % 2 == 0 {
            cancelled.abort();
            release.await.unwrap();
        } else {
            release.await.unwrap();
            cancelled.abort();
        }
        let _ = cancelled.await;
        let token = tokio::time::timeout(Duration::from_secs(20), patient)
            .await
            .expect("the grant was lost: the next waiter hangs")
            .unwrap();
        assert!(token.is_ok(), "round {round}: {token:?}");
    }
}

async fn grant_racing_with_cancel_is_passed_on(fx: Fixture) {
    let (a, b) = (fx.manager().await, fx.manager().await);
    let started = Instant::now();
    grants_race_with_cancels(&fx, [&a, &b], "race", LockOptions::fair(), 100).await;
    // nothing left behind: the last guard's background release frees the lock for good
    let opts = LockOptions::fair().wait_timeout(Duration::from_secs(5));
    let free = a.acquire("race", &opts).await;
    assert!(
        free.is_ok(),
        "the lock is free after the last round: {free:?}"
    );
    assert_eq!(a.queued() + b.queued(), 0);
    assert!(started.elapsed() < Duration::from_secs(60));
}

async fn fair_reentry_shares_the_token(fx: Fixture) {
    let m = fx.manager().await;
    let other = fx.manager().await;
    let owner = m.owner();
    let g1 = owner.acquire("re", &LockOptions::fair()).await.unwrap();
    let g2 = owner.acquire("re", &LockOptions::fair()).await.unwrap();
    assert_eq!(g1.fencing_token(), g2.fencing_token());
    let waiter = tokio::spawn(async move {
        let g = other.acquire("re", &LockOptions::fair()).await.unwrap();
        g.fencing_token()
    });
    assert!(
        eventually(GENEROUS, || m.queued() + other_queued(&fx) >= 1).await,
        "queued"
    );
    g2.release().await.unwrap();
    assert!(!waiter.is_finished(), "one hold is left");
    let first = g1.fencing_token();
    g1.release().await.unwrap();
    let next = tokio::time::timeout(Duration::from_secs(10), waiter)
        .await
        .unwrap()
        .unwrap();
    assert!(next > first);
}

/// On Redis the waiter's manager is another one; count through the queue key.
fn other_queued(fx: &Fixture) -> usize {
    let queue = "{tower-lock:re}:ql";
    let length = fx.cmd_for(queue, &["LLEN", queue]).and_then(|r| r.as_int());
    length.unwrap_or(0) as usize
}

async fn fair_fixed_lease_frees_to_the_next_in_line(fx: Fixture) {
    let m = fx.manager().await;
    let other = fx.manager().await;
    let leaked = m
        .acquire(
            "fixed",
            &LockOptions::fair().lease(Duration::from_millis(300)),
        )
        .await
        .unwrap();
    let info = leaked.info();
    std::mem::forget(leaked);
    let started = Instant::now();
    let opts = LockOptions::fair().wait_timeout(Duration::from_secs(10));
    let next = other
        .acquire("fixed", &opts)
        .await
        .expect("the fixed lease runs out");
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(info.is_lost());
    assert!(next.fencing_token() > info.fencing_token());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_queued_waiters_share_one_connection_and_do_not_poll() {
    let server = support::RedisServer::start();
    let holder = LockManager::redis(&server.url()).await.unwrap();
    // cohorting off: with it, the requests of `m` would wait in memory behind the first one
    let m = LockManager::builder().redis(server.url()).local_handoffs(0);
    let m = m.build().await.unwrap();
    let held = holder.acquire("hot", &LockOptions::fair()).await.unwrap();
    let acquired = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for _ in 0..1000 {
        let (m, acquired) = (m.clone(), acquired.clone());
        tasks.push(tokio::spawn(async move {
            let opts = LockOptions::fair().wait_timeout(Duration::from_secs(60));
            let g = m.acquire("hot", &opts).await.expect("acquire");
            acquired.fetch_add(1, Ordering::SeqCst);
            g.release().await.unwrap();
        }));
    }
    assert!(
        eventually(GENEROUS, || m.queued() == 1000).await,
        "all queued"
    );
    assert_eq!(
        server.cmd(&["LLEN", "{tower-lock:hot}:ql"]).as_int(),
        Some(1000)
    );
    assert_eq!(server.pubsub_clients(), 2, "one inbox per manager");
    let before = server.command_calls("evalsha");
    tokio::time::sleep(Duration::from_secs(1)).await;
    let during = server.command_calls("evalsha") - before;
    // only the watchdog's batched heartbeats (every eviction/3 = 1.7 s, 2 calls for 1,000 waiters)
    assert!(
        during <= 2,
        "{during} script calls while 1,000 requests waited"
    );
    held.release().await.unwrap();
    for t in tasks {
        t.await.unwrap();
    }
    assert_eq!(acquired.load(Ordering::SeqCst), 1000);
}

/// A grant starts with a short claim lease (the eviction deadline); the watchdog extends it, so a
/// holder keeps the lock far longer than the claim.
async fn grant_outlives_its_claim_lease(a: LockManager, b: LockManager) {
    let holder = a.acquire("claim", &LockOptions::fair()).await.unwrap();
    let waiter = {
        let b = b.clone();
        tokio::spawn(async move { b.acquire("claim", &LockOptions::fair()).await })
    };
    assert!(eventually(GENEROUS, || b.queued() == 1).await, "queued");
    holder.release().await.unwrap();
    let granted = waiter.await.unwrap().expect("granted");
    tokio::time::sleep(Duration::from_millis(1500)).await; // five claim leases
    assert!(!granted.is_lost());
    assert!(a
        .try_acquire("claim", &LockOptions::fair())
        .await
        .unwrap()
        .is_none());
    granted.release().await.expect("still held at release");
}

fn short_claim() -> tower_lock::LockManagerBuilder {
    LockManager::builder().fair_eviction(Duration::from_millis(300))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grant_outlives_its_claim_lease_in_memory() {
    let m = short_claim().build().await.unwrap();
    grant_outlives_its_claim_lease(m.clone(), m).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grant_outlives_its_claim_lease_on_redis() {
    let server = support::RedisServer::start();
    let a = short_claim().redis(server.url()).build().await.unwrap();
    let b = short_claim().redis(server.url()).build().await.unwrap();
    grant_outlives_its_claim_lease(a, b).await;
}

/// Within one manager whose requests hand locks on in Redis (cohorting off: with it, the waiter
/// would be handed the lock in memory, and no claim would be made).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grant_handed_over_within_one_manager_outlives_its_claim_lease_on_redis() {
    let server = support::RedisServer::start();
    let m = short_claim().redis(server.url()).local_handoffs(0);
    let m = m.build().await.unwrap();
    grant_outlives_its_claim_lease(m.clone(), m).await;
}

/// A release that grants the lock to a waiter of its own manager returns the grant in its answer,
/// and the manager hands it over: Redis publishes nothing. A waiter of another manager is still
/// told by message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grant_to_a_waiter_of_the_releasing_manager_is_not_published() {
    let server = support::RedisServer::start();
    // cohorting off for `a`: with it, its own waiter would be handed the lock in memory
    let a = LockManager::builder().redis(server.url()).local_handoffs(0);
    let a = a.build().await;
    let b = LockManager::builder().redis(server.url()).build().await;
    let (a, b) = (a.unwrap(), b.unwrap());
    let opts = LockOptions::fair().wait_timeout(Duration::from_secs(10));
    let wait_on = |m: &LockManager| {
        let m = m.clone();
        tokio::spawn(async move { m.acquire("own", &opts).await })
    };

    let holder = a.acquire("own", &opts).await.unwrap();
    let same_manager = wait_on(&a);
    assert!(eventually(GENEROUS, || a.queued() == 1).await, "queued");
    let published = server.command_calls("publish");
    let token = holder.fencing_token();
    holder.release().await.unwrap();
    let granted = same_manager.await.unwrap().expect("granted in memory");
    assert!(granted.fencing_token() > token);
    assert_eq!(
        server.command_calls("publish"),
        published,
        "the grant to the releasing manager's own waiter went out as a message"
    );

    let other_manager = wait_on(&b);
    assert!(eventually(GENEROUS, || b.queued() == 1).await, "queued");
    let token = granted.fencing_token();
    granted.release().await.unwrap();
    let next = other_manager.await.unwrap().expect("granted by message");
    assert!(next.fencing_token() > token);
    assert_eq!(server.command_calls("publish"), published + 1);
}

/// A granted lock is marked for the waiters behind its head. When none came, its release finds
/// the queue and the waiting managers gone with one `EXISTS`, and neither pops the queue nor
/// looks for a manager to tell.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_release_of_a_grant_nobody_waits_behind_pops_nothing() {
    let server = support::RedisServer::start();
    let a = LockManager::redis(&server.url()).await.unwrap();
    let b = LockManager::redis(&server.url()).await.unwrap();
    let opts = LockOptions::fair().wait_timeout(Duration::from_secs(10));
    let holder = a.acquire("alone", &opts).await.unwrap();
    let waiter = {
        let b = b.clone();
        tokio::spawn(async move { b.acquire("alone", &opts).await })
    };
    assert!(eventually(GENEROUS, || b.queued() == 1).await, "queued");
    holder.release().await.unwrap();
    let granted = waiter.await.unwrap().expect("granted");
    let marked = server.cmd(&["HGET", "{tower-lock:alone}", "#w"]);
    assert!(
        marked.as_string().is_some(),
        "a grant marks the lock: {marked:?}"
    );
    let popped = || server.command_calls("lpop") + server.command_calls("zpopmin");
    let before = popped();
    granted.release().await.unwrap();
    assert_eq!(
        popped(),
        before,
        "the release looked for waiters that were gone"
    );
    assert!(a.try_acquire("alone", &opts).await.unwrap().is_some());
}
