//! Fair mode on a slow Redis: a live waiter is not evicted because its manager's watchdog was
//! extending fresh grants. Heartbeats go in rounds of their own, never behind claim extensions.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use tower_lock::{LockManager, LockOptions};

use super::support::proxy::Proxy;
use super::support::{eventually, redis_cmd, RedisServer};

/// The fair eviction of every manager: a beat round every 400 ms.
const EVICTION: Duration = Duration::from_millis(1200);
/// Added by the proxy each way: a round trip of the slow manager takes 800 ms (2/3 of the
/// eviction), so a heartbeat sent after a claim extension lands 1.6 s after the one before it
/// (1/3 of the eviction late), and one sent on its own 800 ms after (1/3 early).
const DELAY: Duration = Duration::from_millis(400);
/// How long the waiter is watched: five evictions, several rounds with claims.
const WINDOW: Duration = Duration::from_secs(6);
/// How long the slow manager holds each fresh grant: longer than a beat round, so that the round
/// after the grant finds its claim to extend.
const HOLD: Duration = Duration::from_millis(1500);
/// Tasks granting the slow manager fresh locks all through the window.
const CHURNS: usize = 8;

async fn manager(url: String) -> LockManager {
    LockManager::builder()
        .redis(url)
        .fair_eviction(EVICTION)
        .build()
        .await
        .unwrap()
}

fn queue(key: &str) -> String {
    format!("{{tower-lock:{key}}}:ql")
}

/// Until aborted, grant `slow` fair locks: `fast` holds a fresh key, `slow` queues for it, `fast`
/// lets go (the release grants it to `slow` under a claim lease), `slow` holds it for `HOLD`.
/// Tasks of odd `n` ask for a fixed lease, the others for the watchdog's: the claims of one round
/// go in two batches, one per lease. Counts the grants in `grants`.
async fn churn(
    n: usize,
    port: u16,
    fast: LockManager,
    slow: LockManager,
    grants: Arc<AtomicUsize>,
) {
    let fair = match n % 2 {
        0 => LockOptions::fair(),
        _ => LockOptions::fair().lease(Duration::from_secs(20)),
    };
    for round in 0.. {
        let key = format!("churn-{n}-{round}");
        let held = fast.acquire(&key, &fair).await.unwrap();
        let waiting = tokio::spawn({
            let (slow, key) = (slow.clone(), key.clone());
            async move { slow.acquire(&key, &fair).await }
        });
        let queue = queue(&key);
        while redis_cmd(port, &["LLEN", &queue]).unwrap().as_int() != Some(1) {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        held.release().await.unwrap();
        let granted = waiting.await.unwrap().unwrap();
        grants.fetch_add(1, Ordering::Relaxed);
        tokio::time::sleep(HOLD).await;
        // the claim may have run out before the slow round trips extended it: that is no matter
        let _ = granted.release().await;
    }
}

/// Manager `slow` reaches Redis through a proxy that adds 400 ms each way. Its request waits for
/// the fair lock `k`, held by another manager; a request of a third manager waits behind it. All
/// the while `slow` is granted other fair locks, so that its watchdog's beat rounds have claims to
/// extend. For six seconds the waiter must stay at the head of the queue with its heartbeat key
/// alive; the holder lets go at the end, or as soon as the waiter could be evicted (its
/// heartbeat key gone): the lock must go to the waiter first, then to the later one. (When a round
/// awaited the claim extensions before it sent the heartbeats, each round with claims landed its
/// heartbeat 1.6 s after the last one: the key ran out every such round, and the release passed
/// the live waiter over. Sent side by side in one round, the heartbeats still waited for the
/// round's end, and claims of two leases took two round trips: the same.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_claim_extensions_do_not_evict_a_live_fair_waiter() {
    let server = RedisServer::start();
    let port = server.port();
    let proxy = Proxy::start(port);
    let holder = manager(server.url()).await;
    let later = manager(server.url()).await;
    let slow = manager(proxy.url()).await;
    let fair = LockOptions::fair();
    let held = holder.acquire("k", &fair).await.unwrap();

    let queued = |n| move || redis_cmd(port, &["LLEN", &queue("k")]).unwrap().as_int() == Some(n);
    let first = tokio::spawn({
        let slow = slow.clone();
        async move {
            let guard = slow.acquire("k", &fair).await.unwrap();
            let token = guard.fencing_token();
            // a claim run out first (slow round trips) frees the lock as well
            let _ = guard.release().await;
            token
        }
    });
    assert!(eventually(Duration::from_secs(5), queued(1)).await);
    let waiter = server
        .cmd(&["LINDEX", &queue("k"), "0"])
        .as_string()
        .unwrap();
    let heartbeat = format!("{{tower-lock:k}}:hb:{waiter}");
    let second = tokio::spawn({
        let later = later.clone();
        async move {
            let guard = later.acquire("k", &fair).await.unwrap();
            let token = guard.fencing_token();
            // a claim run out first (slow round trips) frees the lock as well
            let _ = guard.release().await;
            token
        }
    });
    assert!(eventually(Duration::from_secs(5), queued(2)).await);

    proxy.set_delay(DELAY);
    let grants = Arc::new(AtomicUsize::new(0));
    let churns: Vec<_> = (0..CHURNS)
        .map(|n| {
            let (holder, slow, grants) = (holder.clone(), slow.clone(), grants.clone());
            tokio::spawn(churn(n, port, holder, slow, grants))
        })
        .collect();

    // the waiter is live as long as it heads the queue with its heartbeat key alive
    let live = || {
        let head = server.cmd(&["LINDEX", &queue("k"), "0"]).as_string();
        head.as_deref() == Some(waiter.as_str())
            && server.cmd(&["EXISTS", &heartbeat]).as_int() == Some(1)
    };
    let started = Instant::now();
    let mut evictable = None;
    while started.elapsed() < WINDOW {
        if !live() {
            evictable = Some(started.elapsed());
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // the worst moment to let go, if there is one: the release evicts a waiter found dead
    held.release().await.unwrap();
    let grants = grants.load(Ordering::Relaxed);
    churns.iter().for_each(|churn| churn.abort());
    proxy.heal();

    let waited = Duration::from_secs(10);
    let first = tokio::time::timeout(waited, first).await;
    let second = tokio::time::timeout(waited, second).await;
    let (first, second) = (first.unwrap().unwrap(), second.unwrap().unwrap());
    assert!(
        first < second,
        "the later waiter got the lock first (token {second} before {first}): the live waiter \
         was evicted, its heartbeat key gone {evictable:?} into the window ({grants} grants)"
    );
    assert_eq!(evictable, None, "the waiter could have been evicted");
    assert!(
        grants >= 3,
        "only {grants} grants: the beat rounds had few claims to extend"
    );
}

/// Manager `slow` reaches Redis through a proxy that adds 400 ms each way, so that a heartbeat
/// round takes 800 ms: two beat ticks (every eviction / 3), with nothing else out. For six
/// seconds the heartbeat key of its waiter, queued behind a holder, is watched: a round must
/// follow the one before as soon as it ends, and land with a third of the eviction still left.
/// (When a tick that found the round still out was dropped, the next round went one tick after
/// the round's end: heartbeats landed a whole eviction apart, the key ran down to nothing, and
/// whether it was gone when the next one came was down to milliseconds.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_heartbeat_round_is_followed_at_once_by_the_next() {
    let server = RedisServer::start();
    let port = server.port();
    let proxy = Proxy::start(port);
    let holder = manager(server.url()).await;
    let slow = manager(proxy.url()).await;
    let fair = LockOptions::fair();
    let held = holder.acquire("beat", &fair).await.unwrap();
    let waiting = tokio::spawn({
        let slow = slow.clone();
        async move { slow.acquire("beat", &fair).await.map(|g| g.fencing_token()) }
    });
    let queued = || redis_cmd(port, &["LLEN", &queue("beat")]).unwrap().as_int() == Some(1);
    assert!(eventually(Duration::from_secs(5), queued).await);
    let waiter = server
        .cmd(&["LINDEX", &queue("beat"), "0"])
        .as_string()
        .unwrap();
    let heartbeat = format!("{{tower-lock:beat}}:hb:{waiter}");

    proxy.set_delay(DELAY);
    let started = Instant::now();
    let mut least_left = i64::MAX;
    while started.elapsed() < WINDOW {
        let left = server.cmd(&["PTTL", &heartbeat]).as_int().unwrap();
        least_left = least_left.min(left);
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    held.release().await.unwrap();
    proxy.heal();
    let granted = tokio::time::timeout(Duration::from_secs(10), waiting).await;
    assert!(
        least_left > 100,
        "the heartbeat key ran down to {least_left} ms (-2: gone) between two rounds"
    );
    assert!(granted.unwrap().unwrap().is_ok(), "the waiter got the lock");
}
