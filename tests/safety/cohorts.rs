//! Lock cohorting: exclusive requests of one process hand a lock to each other in memory, up to a
//! bound, then give it back to Redis (fair ones keep FIFO order meanwhile: `fifo_cohorts.rs`).
//! Exclusion and strictly rising tokens hold across local and remote hand-offs; another process
//! waits at most about a bound of holds; a request that leaves (timed out, cancelled) or a lease
//! that is lost leaves nothing behind; re-entry stays local.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tower_lock::{LockError, LockGuard, LockManager, LockOptions};

use super::support;
use support::RedisServer;

async fn manager(server: &RedisServer, handoffs: u32) -> LockManager {
    LockManager::builder()
        .redis(server.url())
        .local_handoffs(handoffs)
        .build()
        .await
        .expect("manager")
}

/// A manager renewing its leases every 200 ms, so that a lease found gone is lost at once.
async fn short_lease_manager(server: &RedisServer) -> LockManager {
    LockManager::builder()
        .redis(server.url())
        .lease(Duration::from_millis(600))
        .build()
        .await
        .expect("manager")
}

/// Delete the lock `key` behind its holder: the next renewal finds it gone, and `guard` is lost.
async fn lose(server: &RedisServer, key: &str, guard: &LockGuard) {
    server.cmd(&["DEL", &format!("{{tower-lock:{key}}}")]);
    tokio::time::timeout(Duration::from_secs(3), guard.lost())
        .await
        .expect("the renewal finds the lock gone");
}

/// Whether Redis holds the lock `key` (of the default namespace).
fn held_in_redis(server: &RedisServer, key: &str) -> bool {
    server
        .cmd(&["EXISTS", &format!("{{tower-lock:{key}}}")])
        .as_int()
        == Some(1)
}

/// Two processes of 8 tasks each take one lock 25 times per task: never two holders, tokens
/// rising strictly in the order the holds began, some hand-offs local (the next token) and some
/// through Redis (a new block).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exclusion_and_token_order_hold_across_local_and_remote_hand_offs() {
    let server = RedisServer::start();
    let run = Contention {
        key: "acct",
        opts: LockOptions::exclusive(),
        handoffs: 4,
        tasks: 16,
        rounds: 25,
        hold: Duration::ZERO,
    };
    let tokens = tokens_of_a_contended_run(&server, run).await;
    assert_eq!(tokens.len(), 400);
    assert!(
        tokens.windows(2).all(|w| w[0] < w[1]),
        "tokens out of order"
    );
    let local = local_hand_offs(&tokens);
    assert!(local > 0, "no local hand-off among {} holds", tokens.len());
    assert!(
        local < 399,
        "every hand-off was local: the bound was not kept"
    );
    assert!(!held_in_redis(&server, "acct"), "the lock stayed held");
}

/// One process keeps 8 tasks taking a lock (5 ms each); a request of another process waits at
/// most about the bound of local hand-offs (3) in holds — twice, if it loses one race for the
/// lock first — not for as long as the first process keeps asking.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_process_waits_at_most_a_bound_of_holds() {
    let server = RedisServer::start();
    let (busy, other) = (manager(&server, 3).await, manager(&server, 3).await);
    let holds = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let (busy, holds, stop) = (busy.clone(), holds.clone(), stop.clone());
        tasks.push(tokio::spawn(async move {
            while !stop.load(Ordering::SeqCst) {
                let guard = busy
                    .acquire("hot", &LockOptions::exclusive())
                    .await
                    .unwrap();
                holds.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(5)).await;
                guard.release().await.unwrap();
            }
        }));
    }
    assert!(
        support::eventually(Duration::from_secs(5), || holds.load(Ordering::SeqCst) > 20).await
    );
    let (before, started) = (holds.load(Ordering::SeqCst), Instant::now());
    let within = LockOptions::exclusive().wait_timeout(Duration::from_secs(10));
    let guard = other.acquire("hot", &within).await;
    let guard = guard.expect("the other process got its turn");
    let (passed, waited) = (holds.load(Ordering::SeqCst) - before, started.elapsed());
    stop.store(true, Ordering::SeqCst);
    guard.release().await.unwrap();
    for task in tasks {
        task.await.unwrap();
    }
    // (bound + 1) holds per turn of the busy process; two turns when a race was lost
    assert!(
        passed <= 2 * (3 + 1) + 1,
        "{passed} holds of the other process went first"
    );
    assert!(waited < Duration::from_secs(2), "waited {waited:?}");
}

/// A request of the cohort that stops waiting (its wait timed out, or it was cancelled) is
/// skipped: the next one gets the lock, and at the end nothing waits and Redis holds nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_that_leave_the_cohort_leave_nothing_behind() {
    let server = RedisServer::start();
    let m = manager(&server, 8).await;
    let held = m.acquire("k", &LockOptions::exclusive()).await.unwrap();
    let brief = LockOptions::exclusive().wait_timeout(Duration::from_millis(100));
    let timed_out = m.acquire("k", &brief).await;
    assert!(
        matches!(timed_out, Err(LockError::Timeout { .. })),
        "{timed_out:?}"
    );
    let cancelled = tokio::spawn({
        let m = m.clone();
        async move { m.acquire("k", &LockOptions::exclusive()).await.map(drop) }
    });
    let next = tokio::spawn({
        let m = m.clone();
        async move { m.acquire("k", &LockOptions::exclusive()).await }
    });
    assert!(support::eventually(Duration::from_secs(5), || m.waiting() == 2).await);
    cancelled.abort();
    assert!(support::eventually(Duration::from_secs(5), || m.waiting() == 1).await);
    let token = held.fencing_token();
    held.release().await.unwrap();
    let next = tokio::time::timeout(Duration::from_secs(5), next)
        .await
        .expect("the next request got the lock")
        .unwrap()
        .unwrap();
    assert_eq!(next.fencing_token(), token + 1, "a local hand-off");
    next.release().await.unwrap();
    assert_eq!(m.waiting(), 0);
    assert!(support::eventually(Duration::from_secs(5), || !held_in_redis(&server, "k")).await);
}

/// An owner re-enters the lock its cohort holds in memory, under the same token; the lock goes
/// back to Redis with its last hold.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reentry_stays_in_memory() {
    let server = RedisServer::start();
    let m = manager(&server, 8).await;
    let owner = m.owner();
    let outer = owner.acquire("r", &LockOptions::exclusive()).await.unwrap();
    let scripts = server.command_calls("evalsha");
    let inner = owner.acquire("r", &LockOptions::exclusive()).await.unwrap();
    let fair_inner = owner.acquire("r", &LockOptions::fair()).await.unwrap();
    assert_eq!(
        server.command_calls("evalsha"),
        scripts,
        "a re-entry went to Redis"
    );
    assert_eq!(inner.fencing_token(), outer.fencing_token());
    assert_eq!(fair_inner.fencing_token(), outer.fencing_token());
    assert!(m
        .try_acquire("r", &LockOptions::exclusive())
        .await
        .unwrap()
        .is_none());
    outer.release().await.unwrap();
    inner.release().await.unwrap();
    assert!(held_in_redis(&server, "r"));
    fair_inner.release().await.unwrap();
    assert!(!held_in_redis(&server, "r"));
}

/// The cohort's lease is lost (the lock vanished from Redis): the holder's guard says so, and the
/// next request does not inherit the lost hold — it takes the lock anew in Redis, under a new
/// block of tokens, and holds it safely.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_lease_is_not_handed_on() {
    let server = RedisServer::start();
    let m = short_lease_manager(&server).await;
    let held = m.acquire("l", &LockOptions::exclusive()).await.unwrap();
    let next = tokio::spawn({
        let m = m.clone();
        async move { m.acquire("l", &LockOptions::exclusive()).await }
    });
    assert!(support::eventually(Duration::from_secs(5), || m.waiting() == 1).await);
    lose(&server, "l", &held).await;
    let token = held.fencing_token();
    let stale = held.release().await;
    assert!(matches!(stale, Err(LockError::NotHeld { .. })), "{stale:?}");
    let next = tokio::time::timeout(Duration::from_secs(5), next)
        .await
        .expect("the next request got the lock")
        .unwrap()
        .unwrap();
    assert!(next.fencing_token() > token + 63, "inherited a lost hold");
    assert!(!next.is_lost());
    assert!(held_in_redis(&server, "l"));
    next.release().await.unwrap();
}

/// The same lost lease, with the holder's owner asking again while its lost guard still lives:
/// it gets the lock anew (no re-entry into a lost hold), and the lost guard's release touches
/// nothing of the new hold.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_hold_is_not_reentered() {
    let server = RedisServer::start();
    let m = short_lease_manager(&server).await;
    let owner = m.owner();
    let old = owner.acquire("o", &LockOptions::exclusive()).await.unwrap();
    lose(&server, "o", &old).await;
    let new = owner.acquire("o", &LockOptions::exclusive()).await.unwrap();
    assert!(new.fencing_token() > old.fencing_token());
    let stale = old.release().await;
    assert!(matches!(stale, Err(LockError::NotHeld { .. })), "{stale:?}");
    assert!(
        held_in_redis(&server, "o"),
        "the lost guard released the new hold"
    );
    assert!(m
        .try_acquire("o", &LockOptions::exclusive())
        .await
        .unwrap()
        .is_none());
    new.release().await.unwrap();
    assert!(!held_in_redis(&server, "o"));
}

/// The shutdown tells the requests waiting in a cohort (`Closed`) and frees the lock at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shutdown_closes_the_cohort() {
    let server = RedisServer::start();
    let m = manager(&server, 8).await;
    let held = m.acquire("s", &LockOptions::exclusive()).await.unwrap();
    let waiter = tokio::spawn({
        let m = m.clone();
        async move { m.acquire("s", &LockOptions::exclusive()).await.map(drop) }
    });
    assert!(support::eventually(Duration::from_secs(5), || m.waiting() == 1).await);
    m.shutdown().await.unwrap();
    let waited = tokio::time::timeout(Duration::from_secs(5), waiter)
        .await
        .expect("the waiter was told")
        .unwrap();
    assert!(matches!(waited, Err(LockError::Closed)), "{waited:?}");
    assert!(held.is_lost());
    assert!(!held_in_redis(&server, "s"));
}

/// Hand-offs in memory among `tokens` (in the order the holds began): a token one above the
/// last one (a hand-off through Redis starts a new block).
pub(super) fn local_hand_offs(tokens: &[u64]) -> usize {
    tokens.windows(2).filter(|w| w[1] == w[0] + 1).count()
}

/// A run of tasks over two processes, each taking one lock in turn.
struct Contention {
    key: &'static str,
    opts: LockOptions,
    /// The managers' bound of local hand-offs.
    handoffs: u32,
    /// Tasks, split over the two processes.
    tasks: usize,
    /// Holds per task.
    rounds: usize,
    /// How long each hold lasts (zero: a yield).
    hold: Duration,
}

/// The tokens of `run`'s holds in the order they began: never two holders, tokens rising.
async fn tokens_of_a_contended_run(server: &RedisServer, run: Contention) -> Vec<u64> {
    let managers = [
        manager(server, run.handoffs).await,
        manager(server, run.handoffs).await,
    ];
    let inside = Arc::new(AtomicBool::new(false));
    let tokens = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for t in 0..run.tasks {
        let (m, inside, tokens) = (managers[t % 2].clone(), inside.clone(), tokens.clone());
        let (key, opts, rounds, hold) = (run.key, run.opts, run.rounds, run.hold);
        tasks.push(tokio::spawn(async move {
            for _ in 0..rounds {
                let guard = m.acquire(key, &opts).await.unwrap();
                assert!(!inside.swap(true, Ordering::SeqCst), "two holders at once");
                tokens.lock().unwrap().push(guard.fencing_token());
                if hold.is_zero() {
                    tokio::task::yield_now().await;
                } else {
                    tokio::time::sleep(hold).await;
                }
                inside.store(false, Ordering::SeqCst);
                guard.release().await.unwrap();
            }
        }));
    }
    super::fifo_cohorts::rising_tokens(tasks, &tokens).await
}

/// Fair requests keep exclusion and rising tokens across local and remote hand-offs, in FIFO
/// order (`fifo_cohorts.rs` shows the order) and in cohort order; in cohort order, requests of
/// one process hand the lock on in memory even while the other process waits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fair_requests_keep_exclusion_and_token_order_in_either_order() {
    let server = RedisServer::start();
    let run = |opts| Contention {
        key: "fair",
        opts,
        handoffs: 8,
        tasks: 8,
        rounds: 20,
        hold: Duration::from_micros(200),
    };
    let fifo = tokens_of_a_contended_run(&server, run(LockOptions::fair())).await;
    assert_eq!(fifo.len(), 160);
    let opted_in = run(LockOptions::fair().cohort_order());
    let cohorts = tokens_of_a_contended_run(&server, opted_in).await;
    assert!(
        local_hand_offs(&cohorts) > 0,
        "no local hand-off with cohort order"
    );
    assert!(!held_in_redis(&server, "fair"));
}

/// Requests waiting in a cohort when the server freezes (SIGSTOP) end as `Unavailable`, as their
/// leader does, never as `Timeout` (which says the lock stayed busy); and when it is killed, each
/// learns it at once instead of one after another.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_server_fails_the_whole_cohort_as_unavailable() {
    let mut server = RedisServer::start();
    let build = || {
        LockManager::builder()
            .redis(server.url())
            .command_timeout(Duration::from_secs(10))
            .build()
    };
    let (holding, waiting) = (build().await.unwrap(), build().await.unwrap());
    let short = LockOptions::exclusive().lease(Duration::from_millis(300));
    let wait = LockOptions::exclusive().wait_timeout(Duration::from_secs(2));
    // the first request leads (it waits in Redis), the three after it queue in the cohort
    let waiters = |key: &'static str| {
        let waiting = waiting.clone();
        async move {
            let mut requests = Vec::new();
            for n in 1..=4 {
                let manager = waiting.clone();
                let request = async move { manager.acquire(key, &wait).await.map(drop) };
                requests.push(tokio::spawn(request));
                let all_wait = || waiting.waiting() == n;
                assert!(support::eventually(Duration::from_secs(2), all_wait).await);
            }
            requests
        }
    };
    let all_unavailable = |outcomes: Vec<Result<(), LockError>>| {
        for outcome in outcomes {
            let err = outcome.expect_err("no lock from an unreachable server");
            assert!(err.is_unavailable(), "{err:?}");
        }
    };

    // found busy first; the retry when the holder's lease ends meets a frozen server
    let _held = holding.acquire("frozen", &short).await.unwrap();
    let frozen = waiters("frozen").await;
    server.stop_process();
    let mut outcomes = Vec::new();
    for waiter in frozen {
        outcomes.push(waiter.await.unwrap());
    }
    server.continue_process();
    all_unavailable(outcomes);

    // killed while they wait: each is told within its wait, none times out
    let _held = holding.acquire("killed", &short).await.unwrap();
    let killed = waiters("killed").await;
    let started = Instant::now();
    server.kill();
    let mut outcomes = Vec::new();
    for waiter in killed {
        outcomes.push(waiter.await.unwrap());
    }
    all_unavailable(outcomes);
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
}

/// Redis restarts empty while a cohort holds a lock and another request of the process waits:
/// the server forgot the hold. The holder's release must not hand that forgotten hold on. Either
/// another process takes the lock first, and the waiting request waits for it; or the waiting
/// request takes it first in Redis, once its cohort's lease is known lost, under a new block.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hold_a_restart_may_have_forgotten_is_not_handed_on() {
    let mut server = RedisServer::start();
    let (m, other) = (manager(&server, 8).await, manager(&server, 8).await);
    let held = m.acquire("r", &LockOptions::exclusive()).await.unwrap();
    let next = tokio::spawn({
        let m = m.clone();
        async move { m.acquire("r", &LockOptions::exclusive()).await }
    });
    assert!(support::eventually(Duration::from_secs(5), || m.waiting() == 1).await);
    server.restart();
    // at once, while the holder's manager reconnects and renews (it learns then that the hold is
    // gone, and the waiting request goes to Redis): its first attempts may meet the connection
    // the restart broke
    let mut taken = None;
    for _ in 0..100 {
        if next.is_finished() {
            break;
        }
        if let Ok(Some(guard)) = other.try_acquire("r", &LockOptions::exclusive()).await {
            taken = Some(guard);
            break;
        }
    }
    let block_end = held.fencing_token() + 63;
    drop(held);
    let Some(taken) = taken else {
        // the waiting request took the forgotten lock in Redis first
        let next = next
            .await
            .unwrap()
            .expect("the waiting request got the lock");
        assert!(
            next.fencing_token() > block_end,
            "inherited a forgotten hold"
        );
        assert!(other
            .try_acquire("r", &LockOptions::exclusive())
            .await
            .unwrap()
            .is_none());
        next.release().await.unwrap();
        return;
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !next.is_finished(),
        "a forgotten hold was handed on while another process held it"
    );
    let token = taken.fencing_token();
    taken.release().await.unwrap();
    let next = tokio::time::timeout(Duration::from_secs(5), next)
        .await
        .expect("the waiting request got the lock")
        .unwrap()
        .unwrap();
    assert!(next.fencing_token() > token);
    next.release().await.unwrap();
}
