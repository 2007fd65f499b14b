//! Quorum locks (RedLock) against 3 and 5 real redis-server processes: mutual exclusion, re-entry,
//! renewal and loss, busy versus down, masters killed, frozen and restarted, validity, cancellation,
//! no polling, the refusal of fair locks, and exactly what the fencing tokens promise.

mod support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use support::fixture::eventually;
use support::{wait_until, RedisServer};
use tower_lock::{LockError, LockManager, LockOptions};

/// Generous: a loaded 2-core machine running several servers can take long to answer.
const NODE_TIMEOUT: Duration = Duration::from_secs(1);

/// N redis-server processes, started in parallel.
struct Masters {
    servers: Vec<RedisServer>,
}

impl Masters {
    fn start(n: usize) -> Masters {
        let servers = std::thread::scope(|s| {
            let starting: Vec<_> = (0..n).map(|_| s.spawn(RedisServer::start)).collect();
            starting
                .into_iter()
                .map(|h| h.join().expect("start redis"))
                .collect()
        });
        Masters { servers }
    }

    fn urls(&self) -> Vec<String> {
        self.servers.iter().map(RedisServer::url).collect()
    }

    async fn manager(&self, lease: Duration) -> LockManager {
        LockManager::builder()
            .quorum(self.urls())
            .lease(lease)
            .node_timeout(NODE_TIMEOUT)
            .command_timeout(Duration::from_secs(1))
            .build()
            .await
            .expect("quorum manager")
    }

    /// Masters (among those up) where the lock hash of `key` exists.
    fn holding(&self, key: &str) -> usize {
        let lock = format!("{{tower-lock:{key}}}");
        self.servers
            .iter()
            .filter(|s| s.is_running())
            .filter(|s| s.try_cmd(&["EXISTS", &lock]).ok().and_then(|r| r.as_int()) == Some(1))
            .count()
    }

    /// The fencing counter of `key` on master `i`.
    fn counter(&self, i: usize, key: &str) -> u64 {
        let reply = self.servers[i].cmd(&["GET", &format!("{{tower-lock:{key}}}:f")]);
        reply.as_int().map_or(0, |t| t as u64)
    }

    /// Make master `i` issue its next token for `key` as if its clock ran `ahead` (the token is
    /// max(last + 1, clock in µs), so a counter set ahead acts exactly like that clock).
    fn clock_ahead(&self, i: usize, key: &str, ahead: Duration) {
        let time = self.servers[i].cmd(&["TIME"]).as_strings().expect("TIME");
        let now_us: u64 =
            time[0].parse::<u64>().unwrap() * 1_000_000 + time[1].parse::<u64>().unwrap();
        let ahead = now_us + ahead.as_micros() as u64;
        let fence = format!("{{tower-lock:{key}}}:f");
        let reply = self.servers[i].cmd(&["SET", &fence, &ahead.to_string(), "PX", "60000"]);
        assert!(reply.is_ok(), "{reply:?}");
    }

    /// Hold `key` on master `i` for someone else, for `ttl`.
    fn foreign_hold(&self, i: usize, key: &str, ttl: Duration) {
        let lock = format!("{{tower-lock:{key}}}");
        self.servers[i].cmd(&["HSET", &lock, "someone:1", "1", "#t", "1"]);
        self.servers[i].cmd(&["PEXPIRE", &lock, &ttl.as_millis().to_string()]);
    }

    fn evalsha_total(&self) -> u64 {
        self.servers
            .iter()
            .map(|s| s.command_calls("evalsha"))
            .sum()
    }
}

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
    assert!(wait_until(Duration::from_secs(5), || masters
        .holding("acct")
        == 0));
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
    assert!(wait_until(Duration::from_secs(5), || {
        (0..100).all(|i| masters.holding(&format!("many{i}")) == 0)
    }));
    assert_eq!(m.held(), 0);
    let before = masters.evalsha_total();
    tokio::time::sleep(lease * 2).await;
    assert_eq!(
        masters.evalsha_total(),
        before,
        "nothing renewed after release"
    );
}

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
    eventually("the waiter waits", || other.waiting() == 1).await;
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
    assert!(wait_until(Duration::from_secs(5), || masters
        .holding("ice")
        == 0));
    let g = m.acquire("ice", &LockOptions::exclusive()).await.unwrap();
    assert!(wait_until(Duration::from_secs(5), || masters
        .holding("ice")
        == 3));
    drop(g);
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
        wait_until(Duration::from_millis(500), || masters.holding("late") == 0),
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
    assert!(wait_until(Duration::from_secs(2), || {
        masters.servers[2].cmd(&["EXISTS", lock]).as_int() == Some(0)
    }));
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
    assert!(wait_until(Duration::from_secs(5), || masters.servers[2]
        .cmd(&["EXISTS", "{tower-lock:inflight}"])
        .as_int()
        == Some(1)));
    attempt.abort();
    assert!(attempt.await.unwrap_err().is_cancelled());
    masters.servers[0].continue_process();
    masters.servers[1].continue_process();
    // it is finished in the background and, since nobody wants it, released everywhere
    assert!(
        wait_until(Duration::from_secs(5), || masters.holding("inflight") == 0),
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
    assert!(wait_until(Duration::from_secs(5), || masters
        .servers
        .iter()
        .filter(|s| s.cmd(&["EXISTS", "{tower-lock:w1}:w"]).as_int() == Some(1))
        .count()
        >= 2));
    waiting.abort();
    assert!(waiting.await.unwrap_err().is_cancelled());
    assert_eq!(m.waiting(), 0);
    assert!(wait_until(Duration::from_secs(5), || masters
        .servers
        .iter()
        .all(
            |s| s.cmd(&["EXISTS", "{tower-lock:w1}:w"]).as_int() == Some(0)
        )));
    drop(held);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_are_woken_by_a_release_on_any_master_without_polling() {
    let masters = Masters::start(3);
    // a node timeout no loaded test machine reaches: a timed-out attempt is undone, which is a
    // command, and this test counts commands
    let patient = || {
        LockManager::builder()
            .quorum(masters.urls())
            .node_timeout(Duration::from_secs(10))
            .build()
    };
    let holder = patient().await.unwrap();
    let m = patient().await.unwrap();
    let held = holder
        .acquire("hot", &LockOptions::exclusive())
        .await
        .unwrap();
    // held on every master (a majority decided the acquisition; the third grant may land after)
    assert!(wait_until(Duration::from_secs(5), || masters
        .holding("hot")
        == 3));
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
    assert!(wait_until(Duration::from_secs(10), || {
        masters
            .servers
            .iter()
            .all(|s| s.command_calls("evalsha") >= 51)
    }));
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
async fn the_token_is_the_largest_of_the_granting_masters_and_reentry_keeps_it() {
    let masters = Masters::start(3);
    let m = masters.manager(Duration::from_secs(30)).await;
    // master 1 runs 5 s ahead; master 2 is held elsewhere, so masters 0 and 1 grant the lock
    masters.clock_ahead(1, "tok", Duration::from_secs(5));
    masters.foreign_hold(2, "tok", Duration::from_secs(30));
    let owner = m.owner();
    let g = owner
        .acquire("tok", &LockOptions::exclusive())
        .await
        .unwrap();
    let granted = [masters.counter(0, "tok"), masters.counter(1, "tok")];
    assert_eq!(g.fencing_token(), granted[0].max(granted[1]), "{granted:?}");
    assert_eq!(g.fencing_token(), granted[1], "the master ahead decides");
    let again = owner
        .acquire("tok", &LockOptions::exclusive())
        .await
        .unwrap();
    assert_eq!(
        again.fencing_token(),
        g.fencing_token(),
        "re-entry keeps it"
    );
    drop(again);
    g.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_rise_across_holders_counter_expiry_and_a_restarted_master() {
    let mut masters = Masters::start(3);
    let managers = [
        masters.manager(Duration::from_secs(30)).await,
        masters.manager(Duration::from_secs(30)).await,
    ];
    let mut last = 0;
    let mut take = |token: u64, when: &str| {
        assert!(token > last, "token went back {when}: {token} after {last}");
        last = token;
    };
    for i in 0..20 {
        let g = managers[i % 2]
            .acquire("rise", &LockOptions::exclusive())
            .await
            .unwrap();
        take(g.fencing_token(), "between holders");
        g.release().await.unwrap();
    }
    for server in &masters.servers {
        server.cmd(&["DEL", "{tower-lock:rise}:f"]);
    }
    let g = managers[0]
        .acquire("rise", &LockOptions::exclusive())
        .await
        .unwrap();
    take(g.fencing_token(), "after the counters expired");
    g.release().await.unwrap();
    masters.servers[0].restart();
    for i in 0..4 {
        let g = managers[i % 2]
            .acquire("rise", &LockOptions::exclusive())
            .await
            .unwrap();
        take(g.fencing_token(), "after a master restarted empty");
        g.release().await.unwrap();
    }
}

/// What the token does NOT promise, and what it does, with one master's clock ahead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_master_clock_ahead_can_lower_the_token_after_a_release_but_not_after_an_expiry() {
    let masters = Masters::start(3);
    let a = masters.manager(Duration::from_secs(30)).await;
    let b = masters.manager(Duration::from_secs(30)).await;

    // After a release, the next holder may not use the master that is an hour ahead. Holds of
    // others on one master pick each majority: {1, 2} for the first holder, {0, 1} for the second.
    masters.clock_ahead(2, "rel", Duration::from_secs(3600));
    masters.foreign_hold(0, "rel", Duration::from_secs(30));
    let first = a.acquire("rel", &LockOptions::exclusive()).await.unwrap();
    let t_first = first.fencing_token();
    assert_eq!(t_first, masters.counter(2, "rel"));
    let t_shared = masters.counter(1, "rel");
    masters.servers[0].cmd(&["DEL", "{tower-lock:rel}"]);
    first.release().await.unwrap();
    masters.foreign_hold(2, "rel", Duration::from_secs(30));
    let second = b.acquire("rel", &LockOptions::exclusive()).await.unwrap();
    let t_second = second.fencing_token();
    assert!(
        t_second < t_first,
        "documented limit: the master ahead lifted the first token ({t_first} vs {t_second})"
    );
    assert!(
        t_second > t_shared,
        "always: larger than what the shared master issued to the earlier holder"
    );
    second.release().await.unwrap();

    // After an expiry (a paused holder), a whole lease separates the two acquisitions: a master
    // ahead by less than the lease cannot lower the next token, even when the next holder does
    // not go through it.
    masters.clock_ahead(2, "exp", Duration::from_millis(200));
    masters.foreign_hold(0, "exp", Duration::from_secs(30));
    let paused = a
        .acquire(
            "exp",
            &LockOptions::exclusive().lease(Duration::from_millis(600)),
        )
        .await
        .unwrap();
    let t_paused = paused.fencing_token();
    assert_eq!(t_paused, masters.counter(2, "exp"));
    std::mem::forget(paused); // it never releases: its lease runs out
    masters.servers[0].cmd(&["DEL", "{tower-lock:exp}"]);
    masters.foreign_hold(2, "exp", Duration::from_secs(30));
    let next = b
        .acquire(
            "exp",
            &LockOptions::exclusive().wait_timeout(Duration::from_secs(5)),
        )
        .await
        .expect("acquired after the paused holder's lease ran out");
    assert!(
        next.fencing_token() > t_paused,
        "{} <= {t_paused}",
        next.fencing_token()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fair_locks_are_refused_and_bad_quorums_do_not_build() {
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
    assert!(wait_until(Duration::from_secs(10), || masters.servers[2]
        .pubsub_clients()
        == 1));
    // a majority down at start: unavailable
    masters.servers[1].kill();
    masters.servers[2].kill();
    let err = LockManager::quorum(masters.urls()).await.unwrap_err();
    assert!(err.is_unavailable(), "{err:?}");
}
