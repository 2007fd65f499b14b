//! A guard's lost signal fires when its lease may have run out in Redis, not later: at the end of
//! the last lease known to have reached Redis, even while Redis cannot be asked (a frozen server),
//! and at the end of a fair grant's claim lease when the watchdog could not extend it.

use std::time::{Duration, Instant};

use tower_lock::{LockManager, LockOptions};

use crate::support::RedisServer;

const LEASE: Duration = Duration::from_secs(1);
/// Timers, scheduling and the test's own steps, on a busy 2-core machine.
const MARGIN: Duration = Duration::from_millis(300);

async fn manager(server: &RedisServer, lease: Duration, eviction: Duration) -> LockManager {
    LockManager::builder()
        .redis(server.url())
        .lease(lease)
        .fair_eviction(eviction)
        .command_timeout(Duration::from_millis(400))
        .build()
        .await
        .expect("manager")
}

/// Redis freezes right after the acquisition: no renewal reaches it. The lease ends one lease after
/// the acquire started; `lost()` fires then, not at the first renewal round that notices (a round
/// whose renewal waits out the command timeout first).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_nobody_could_renew_is_lost_at_its_end() {
    let server = RedisServer::start();
    let m = manager(&server, LEASE, Duration::from_secs(5)).await;
    let started = Instant::now();
    let guard = m
        .acquire("frozen", &LockOptions::exclusive())
        .await
        .unwrap();
    server.stop_process();
    tokio::time::timeout(LEASE + MARGIN, guard.lost())
        .await
        .expect("lost() fires at the end of the lease");
    let at = started.elapsed();
    server.continue_process();
    assert!(guard.is_lost());
    assert!(at >= LEASE - MARGIN, "lost() fired early: {at:?}");
    println!("lost() fired {at:?} after the acquire started (lease {LEASE:?})");
}

/// A fair grant starts under the claim lease (the eviction deadline, here 1 s) until the watchdog's
/// next heartbeat round extends it to the 30 s lease. Redis freezes right after the grant, so the
/// extension cannot happen: the claim runs out in Redis, and the guard's `lost()` fires by then
/// (counted from before the grant, so possibly a little earlier), not a whole 30 s lease later.
/// (Should the round have extended the grant before the freeze, which the lock's remaining lease
/// shows afterwards, the round is run again.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fair_grant_whose_claim_could_not_be_extended_is_lost_when_the_claim_ends() {
    let server = RedisServer::start();
    let claim = Duration::from_secs(1);
    let holder = manager(&server, Duration::from_secs(30), claim).await;
    let waiting = manager(&server, Duration::from_secs(30), claim).await;
    for round in 0..5 {
        let key = format!("grant{round}");
        let held = holder.acquire(&key, &LockOptions::fair()).await.unwrap();
        let waiter = {
            let (waiting, key) = (waiting.clone(), key.clone());
            tokio::spawn(async move { waiting.acquire(&key, &LockOptions::fair()).await })
        };
        while waiting.queued() == 0 {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        held.release().await.unwrap();
        let granted = waiter.await.unwrap().expect("granted");
        let at = Instant::now();
        server.stop_process();
        let lost = tokio::time::timeout(claim + MARGIN, granted.lost()).await;
        let waited = at.elapsed();
        if lost.is_ok() {
            server.continue_process();
            assert!(granted.is_lost());
            println!("lost() fired {waited:?} after the grant (claim {claim:?})");
            return;
        }
        // lost() did not fire: only right if the grant had been extended before the freeze, which
        // the lock's lease shows (a claim left unextended ran out while Redis was frozen)
        server.continue_process();
        let pttl = server.cmd(&["PTTL", &format!("{{tower-lock:{key}}}")]);
        assert!(
            pttl.as_int().is_some_and(|ms| ms > claim.as_millis() as i64),
            "the claim ran out in Redis (PTTL {pttl:?}) but lost() had not fired {waited:?} after the grant"
        );
    }
    panic!("every round's grant was extended before Redis froze");
}
