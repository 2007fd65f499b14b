//! A cohort's hold is lost while its holder keeps the guard (a slow handler: the layer's default
//! on a lost lease) and other requests of the process wait behind it in memory. The lock may be
//! free in Redis: the waiters must go there at once, not sleep until their wait times out. For
//! exclusive, fair and fair in cohort order; with the lock deleted, a server paused past the
//! lease, and an empty restart; and with several waiters behind a holder that re-entered.

use std::time::Duration;

use tower_lock::{LockError, LockGuard, LockManager, LockOptions};

use super::support;
use support::RedisServer;

/// The lease: renewed every 200 ms, so a loss is known within moments.
const LEASE: Duration = Duration::from_millis(600);

/// The waiters' wait: far longer than a loss takes to be known, far shorter than the test.
const WAIT: Duration = Duration::from_secs(6);

async fn manager(server: &RedisServer) -> LockManager {
    LockManager::builder()
        .redis(server.url())
        .lease(LEASE)
        .command_timeout(Duration::from_secs(3))
        .build()
        .await
        .expect("manager")
}

/// How the holder's lease is lost.
#[derive(Clone, Copy, Debug)]
enum Fault {
    /// Somebody deletes the lock: the next renewal finds it gone.
    Deleted,
    /// The server freezes for twice the lease: the lease runs out unrenewed.
    Paused,
    /// The server restarts empty: the renewal after the reconnection finds the lock gone.
    Restarted,
}

async fn apply(server: &mut RedisServer, key: &str, fault: Fault) {
    match fault {
        Fault::Deleted => {
            server.cmd(&["DEL", &format!("{{tower-lock:{key}}}")]);
        }
        Fault::Paused => {
            server.stop_process();
            tokio::time::sleep(2 * LEASE).await;
            server.continue_process();
        }
        Fault::Restarted => server.restart(),
    }
}

/// `waiters` requests of the process wait behind a holder (which re-entered `reentries` times)
/// for `key` with `opts`; the holder's lease is lost by `fault`, and it keeps its guards. Every
/// waiter gets the lock in turn within its wait, under a token above the lost hold's block.
async fn waiters_go_to_redis(
    key: &'static str,
    opts: LockOptions,
    fault: Fault,
    waiters: usize,
    reentries: usize,
) {
    let mut server = RedisServer::start();
    let m = manager(&server).await;
    let owner = m.owner();
    let held = owner.acquire(key, &opts).await.unwrap();
    let mut kept: Vec<LockGuard> = Vec::new();
    for _ in 0..reentries {
        kept.push(owner.acquire(key, &opts).await.unwrap());
    }
    let mut requests = Vec::new();
    for n in 1..=waiters {
        let (waiter, opts) = (m.clone(), opts.wait_timeout(WAIT));
        requests.push(tokio::spawn(async move {
            let guard = waiter.acquire(key, &opts).await?;
            let token = guard.fencing_token();
            // a short hold, then the next waiter's turn
            tokio::time::sleep(Duration::from_millis(5)).await;
            guard.release().await.map(|()| token)
        }));
        assert!(support::eventually(Duration::from_secs(5), || m.waiting() == n).await);
    }
    apply(&mut server, key, fault).await;
    tokio::time::timeout(Duration::from_secs(5), held.lost())
        .await
        .expect("the holder learns its lease is lost");
    let mut tokens = Vec::new();
    for request in requests {
        let got: Result<u64, LockError> = request.await.unwrap();
        let token = got.unwrap_or_else(|err| {
            panic!("{fault:?}, {opts:?}: a waiter slept while the lock was free: {err:?}")
        });
        tokens.push(token);
    }
    // the holder kept its guards all along
    assert!(held.is_lost());
    assert!(
        tokens.iter().all(|&t| t > held.fencing_token() + 63),
        "a waiter inherited the lost hold: {tokens:?} after {}",
        held.fencing_token()
    );
    assert!(
        tokens.windows(2).all(|w| w[0] < w[1]),
        "tokens out of order: {tokens:?}"
    );
    drop((held, kept));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exclusive_waiters_go_to_redis_when_the_lock_is_deleted() {
    waiters_go_to_redis("x", LockOptions::exclusive(), Fault::Deleted, 1, 0).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fair_waiters_go_to_redis_when_the_lock_is_deleted() {
    waiters_go_to_redis("f", LockOptions::fair(), Fault::Deleted, 1, 0).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cohort_order_waiters_go_to_redis_when_the_lock_is_deleted() {
    let opts = LockOptions::fair().cohort_order();
    waiters_go_to_redis("c", opts, Fault::Deleted, 1, 0).await;
}

/// The server freezes past the lease: the holder's deadline passes unrenewed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_go_to_redis_after_a_pause_longer_than_the_lease() {
    waiters_go_to_redis("p", LockOptions::exclusive(), Fault::Paused, 1, 0).await;
}

/// The server restarts empty; three waiters behind a holder that re-entered twice, in cohort
/// order: each gets the lock in turn.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn several_waiters_behind_a_reentered_holder_go_to_redis_after_a_restart() {
    let opts = LockOptions::fair().cohort_order();
    waiters_go_to_redis("r", opts, Fault::Restarted, 3, 2).await;
}
