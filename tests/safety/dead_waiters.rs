//! Thousands of dead waiters in a queue: a process that queued them was killed, its heartbeat keys
//! still live. However many stand ahead of a live waiter, the lock goes to it promptly once it is
//! free (a grant's bound on the waiters it looks at hands the rest on at once, never to the next
//! heartbeat), and no script leaves a key without an expiry on the way.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use tower_lock::{LockError, LockGuard, LockManager, LockOptions};

use super::support::proxy::Proxy;
use super::support::{eventually, RedisServer};

/// Dead waiters queued by the killed process.
const DEAD: usize = 20_000;

/// A manager on `url` whose fair waiters are heartbeat every `eviction / 3`, each request on its
/// own in Redis (no cohort, no read group).
async fn manager(url: &str, eviction: Duration) -> LockManager {
    LockManager::builder()
        .redis(url)
        .fair_eviction(eviction)
        .local_handoffs(0)
        .build()
        .await
        .expect("manager")
}

/// Queue `count` waiters of `managers` processes that were killed, as they would have left them:
/// each in the queue `queue` of lock `key` (`push`: at its tail, RPUSH, or its head, LPUSH) with
/// its heartbeat key alive for a minute, nobody listening on its manager's channel. `kind` ends
/// each waiter's name ('' for a fair waiter, '|r', '|w' or '|n' for a shared one). Waiters of
/// different managers alternate.
pub(super) fn queue_dead(
    server: &RedisServer,
    key: &str,
    queue: &str,
    count: usize,
    managers: usize,
    kind: &str,
    push: &str,
) {
    let script = "for i = 1, tonumber(ARGV[2]) do \
          local waiter = 'dead' .. (i % tonumber(ARGV[3])) .. ':' .. i .. '|1' .. ARGV[4] \
          redis.call(ARGV[5], KEYS[1], waiter) \
          redis.call('SET', ARGV[1] .. waiter, '1', 'PX', '60000') \
        end \
        redis.call('PEXPIRE', KEYS[1], '60000') \
        return redis.call('LLEN', KEYS[1])";
    let lock = format!("{{tower-lock:{key}}}");
    let beats = format!("{lock}:hb:");
    let queue = format!("{lock}:{queue}");
    let (count, managers) = (count.to_string(), managers.to_string());
    let queued = server.cmd(&[
        "EVAL", script, "1", &queue, &beats, &count, &managers, kind, push,
    ]);
    assert!(queued.as_int().is_some(), "{queued:?}");
}

/// The keys of the crate's namespace that have no expiry (`PTTL` -1).
pub(super) fn keys_without_expiry(server: &RedisServer) -> Vec<String> {
    let script = "local found, cursor = {}, '0' \
        repeat \
          local page = redis.call('SCAN', cursor, 'MATCH', '{tower-lock:*', 'COUNT', 1000) \
          cursor = page[1] \
          for _, key in ipairs(page[2]) do \
            if redis.call('PTTL', key) == -1 then found[#found + 1] = key end \
          end \
        until cursor == '0' \
        return found";
    let found = server.cmd(&["EVAL", script, "0"]);
    found.as_strings().unwrap_or_else(|| panic!("{found:?}"))
}

/// Watches the keys of lock `key` every few milliseconds until stopped: whether one of them was
/// ever seen without an expiry.
pub(super) struct ExpiryWatch {
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<Vec<String>>,
}

impl ExpiryWatch {
    pub(super) fn start(server: &RedisServer, key: &str) -> Self {
        let lock = format!("{{tower-lock:{key}}}");
        let keys: Vec<String> = ["", ":ql", ":qs", ":s", ":w", ":f"]
            .iter()
            .map(|suffix| format!("{lock}{suffix}"))
            .collect();
        let (stop, port) = (Arc::new(AtomicBool::new(false)), server.port());
        let task = tokio::spawn({
            let stop = stop.clone();
            async move {
                let mut seen = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    for key in &keys {
                        let pttl = super::support::redis_cmd(port, &["PTTL", key]);
                        if pttl.ok().and_then(|r| r.as_int()) == Some(-1) && !seen.contains(key) {
                            seen.push(key.clone());
                        }
                    }
                    tokio::time::sleep(Duration::from_millis(2)).await;
                }
                seen
            }
        });
        ExpiryWatch { stop, task }
    }

    /// Stop watching: the keys seen without an expiry.
    pub(super) async fn stop(self) -> Vec<String> {
        self.stop.store(true, Ordering::Relaxed);
        self.task.await.expect("watch task")
    }
}

/// The outcome of `request` within `within`.
async fn outcome(
    request: tokio::task::JoinHandle<Result<LockGuard, LockError>>,
    within: Duration,
) -> Result<LockGuard, LockError> {
    tokio::time::timeout(within, request)
        .await
        .expect("the request ended within its wait timeout")
        .expect("request task")
}

/// Lock `key` held by `holder` in fair mode, `DEAD` dead waiters of `managers` killed processes
/// queued behind it, then a live request of `waiter` with `opts`. The holder lets go: the live
/// request must get the lock within 3 s (its wait timeout is 5 s; the first heartbeat of its
/// manager, which `eviction` sets, may come later), no key may be seen without an expiry meanwhile
/// or after.
async fn live_waiter_behind_dead_ones(eviction: Duration, managers: usize, opts: LockOptions) {
    let server = RedisServer::start();
    let holder = manager(&server.url(), eviction).await;
    let waiter = manager(&server.url(), eviction).await;
    let held = holder.acquire("k", &LockOptions::fair()).await.unwrap();
    queue_dead(&server, "k", "ql", DEAD, managers, "", "RPUSH");
    let watch = ExpiryWatch::start(&server, "k");
    let request = tokio::spawn({
        let (waiter, opts) = (waiter.clone(), opts.wait_timeout(Duration::from_secs(5)));
        async move { waiter.acquire("k", &opts).await }
    });
    let queued = || server.cmd(&["LLEN", "{tower-lock:k}:ql"]).as_int() == Some(DEAD as i64 + 1);
    assert!(
        eventually(Duration::from_secs(5), queued).await,
        "the live request queued"
    );
    let released = Instant::now();
    held.release().await.unwrap();
    let got = outcome(request, Duration::from_secs(10)).await;
    let waited = released.elapsed();
    let guard =
        got.unwrap_or_else(|err| panic!("the free lock never reached the live waiter: {err:?}"));
    assert!(
        waited < Duration::from_secs(3),
        "the live waiter got the free lock {waited:?} after its release"
    );
    guard.release().await.unwrap();
    let seen = watch.stop().await;
    assert!(seen.is_empty(), "keys seen without an expiry: {seen:?}");
    let left = keys_without_expiry(&server);
    assert!(left.is_empty(), "keys left without an expiry: {left:?}");
}

/// The review's case: one killed process queued 20,000 fair waiters. The live waiter's manager
/// heartbeats every 10 s: only the release can hand it the lock in time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_fair_waiter_behind_twenty_thousand_dead_ones_gets_the_free_lock() {
    live_waiter_behind_dead_ones(Duration::from_secs(30), 1, LockOptions::fair()).await;
}

/// As above, with a waiter's manager that heartbeats every 200 ms: its own attempts, woken by
/// the heartbeat, work through the dead waiters too, and none of them may leave the lock a hash
/// without an expiry.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attempts_through_dead_waiters_leave_no_key_without_expiry() {
    live_waiter_behind_dead_ones(Duration::from_millis(600), 1, LockOptions::fair()).await;
}

/// A variant: the dead waiters come from 400 killed processes, alternating (each process's death
/// is learned anew), and the live request asks in exclusive mode (it finds the fair queue and
/// waits in it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exclusive_request_behind_dead_waiters_of_many_processes_gets_the_free_lock() {
    live_waiter_behind_dead_ones(Duration::from_secs(30), 400, LockOptions::exclusive()).await;
}

/// The review's setup with a real process: manager B queues 400 fair waiters (more than any one
/// grant looks at, before), then is cut off for good (its connections closed, no new one gets
/// through), as if killed. C queues behind them; A lets go; C gets the lock at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_of_a_killed_manager_do_not_hold_back_a_live_one() {
    const B_WAITERS: usize = 400;
    let server = RedisServer::start();
    let proxy = Proxy::start(server.port());
    let eviction = Duration::from_secs(30);
    let (a, b, c) = (
        manager(&server.url(), eviction).await,
        manager(&proxy.url(), eviction).await,
        manager(&server.url(), eviction).await,
    );
    let held = a.acquire("k", &LockOptions::fair()).await.unwrap();
    let doomed: Vec<_> = (0..B_WAITERS)
        .map(|_| {
            let b = b.clone();
            tokio::spawn(async move { b.acquire("k", &LockOptions::fair()).await })
        })
        .collect();
    let server = &server;
    let queued =
        |n: usize| move || server.cmd(&["LLEN", "{tower-lock:k}:ql"]).as_int() == Some(n as i64);
    assert!(eventually(Duration::from_secs(10), queued(B_WAITERS)).await);
    proxy.blackhole();
    proxy.cut();
    assert!(eventually(Duration::from_secs(5), || server.pubsub_clients() == 2).await);
    let watch = ExpiryWatch::start(server, "k");
    let request = tokio::spawn({
        let (c, opts) = (
            c.clone(),
            LockOptions::fair().wait_timeout(Duration::from_secs(5)),
        );
        async move { c.acquire("k", &opts).await }
    });
    assert!(eventually(Duration::from_secs(5), queued(B_WAITERS + 1)).await);
    let released = Instant::now();
    held.release().await.unwrap();
    let guard = outcome(request, Duration::from_secs(10))
        .await
        .unwrap_or_else(|err| panic!("the free lock never reached C: {err:?}"));
    let waited = released.elapsed();
    assert!(
        waited < Duration::from_secs(3),
        "C got the free lock {waited:?} after its release"
    );
    guard.release().await.unwrap();
    let seen = watch.stop().await;
    assert!(seen.is_empty(), "keys seen without an expiry: {seen:?}");
    for request in doomed {
        request.abort();
    }
}
