//! A re-entry that fails must not cost the owner the hold it already has.

use std::time::{Duration, Instant};

use tower_lock::{LockManager, LockOptions};

use crate::support;
use crate::support::RedisServer;

/// A manager whose re-entries go to Redis: with lock cohorting on (the default), an exclusive
/// re-entry is made in memory and cannot fail this way (`tests/safety/cohorts.rs`).
async fn manager(server: &RedisServer) -> LockManager {
    manager_at(server.url()).await
}

async fn manager_at(url: String) -> LockManager {
    LockManager::builder()
        .redis(url)
        .local_handoffs(0)
        .command_timeout(Duration::from_millis(300))
        .build()
        .await
        .expect("manager")
}

/// The owner holds the lock; its connection is killed and its ACL user switched off, so its
/// re-entry fails without reaching Redis (a fresh connection cannot log in; a killed one alone
/// is replaced before the re-entry is sent). The failed request's clean-up must leave the outer
/// hold alone: another manager must not get the lock while the outer guard holds it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_reentry_leaves_the_outer_hold_in_place() {
    let server = RedisServer::start();
    let user = ["ACL", "SETUSER", "u", "on", ">pw", "~*", "&*", "+@all"];
    assert!(server.cmd(&user).is_ok());
    let url = format!("redis://u:pw@127.0.0.1:{}", server.port());
    for (mode, opts) in [
        ("fair", LockOptions::fair()),
        ("exclusive", LockOptions::exclusive()),
    ] {
        let m = manager_at(url.clone()).await;
        let owner = m.owner();
        let outer = owner.acquire(mode, &opts).await.unwrap();
        assert!(server.cmd(&["ACL", "SETUSER", "u", "off"]).is_ok());
        server.cmd(&["CLIENT", "KILL", "TYPE", "normal", "USER", "u"]);
        // built after the kill: its command connection, open once it is built, is not killed
        let other = manager(&server).await;
        let reentry = owner.acquire(mode, &opts).await;
        assert!(
            reentry.is_err(),
            "{mode}: the re-entry went through a killed connection"
        );
        // the failed request's clean-up runs in the background: watch the lock for a while
        let until = Instant::now() + Duration::from_millis(500);
        while Instant::now() < until {
            let stolen = other.try_acquire(mode, &opts).await.unwrap();
            assert!(
                stolen.is_none(),
                "{mode}: another manager took the held lock"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(server.cmd(&["ACL", "SETUSER", "u", "on"]).is_ok());
        assert!(!outer.is_lost());
        outer.release().await.unwrap();
        assert!(other.try_acquire(mode, &opts).await.unwrap().is_some());
    }
}

/// Two requests of one owner wait at once for a lock someone else holds. When it is free, one
/// takes it and the other re-enters it (one token, two holds): the lock stays held until both
/// are released. (A lock's queue and its grants know owners: before, the second could take the
/// first's grant as its own, one hold for two guards, and the first release freed the lock under
/// the second.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_waiting_requests_of_one_owner_both_hold_until_both_release() {
    let server = RedisServer::start();
    for backend in ["memory", "redis"] {
        let (holder, m) = match backend {
            "memory" => (LockManager::memory(), None),
            _ => (manager(&server).await, Some(manager(&server).await)),
        };
        let m = m.unwrap_or_else(|| holder.clone());
        for (mode, opts) in [
            ("fair", LockOptions::fair()),
            ("exclusive", LockOptions::exclusive()),
        ] {
            let key = format!("twice-{mode}");
            let held = holder.acquire(&key, &opts).await.unwrap();
            let owner = m.owner();
            let spawn = || {
                let (owner, key) = (owner.clone(), key.clone());
                tokio::spawn(async move { owner.acquire(&key, &opts).await.unwrap() })
            };
            let (first, second) = (spawn(), spawn());
            assert!(support::eventually(Duration::from_secs(5), || m.waiting() >= 1).await);
            // let the second request start too (it waits behind the first)
            tokio::time::sleep(Duration::from_millis(50)).await;
            held.release().await.unwrap();
            let both = Duration::from_secs(5);
            let what = format!("{backend} {mode}");
            let a = tokio::time::timeout(both, first)
                .await
                .expect(&what)
                .unwrap();
            let b = tokio::time::timeout(both, second)
                .await
                .expect(&what)
                .unwrap();
            assert_eq!(
                a.fencing_token(),
                b.fencing_token(),
                "{what}: one lock, re-entered"
            );
            a.release().await.unwrap();
            assert!(
                m.try_acquire(&key, &opts).await.unwrap().is_none(),
                "{what}: the lock was freed while the second request still held it"
            );
            b.release().await.unwrap();
            assert!(
                m.try_acquire(&key, &opts).await.unwrap().is_some(),
                "{what}"
            );
        }
    }
}

/// An owner's guard loses its lease (the lock was deleted behind it), and the owner takes the lock
/// again. Releasing the old guard must not release the new hold, nor stop the new hold's lease
/// from being renewed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_guard_leaves_its_owners_new_hold_alone() {
    let server = RedisServer::start();
    let lease = Duration::from_millis(600);
    let manager = || async {
        LockManager::builder()
            .redis(server.url())
            .lease(lease)
            .build()
            .await
            .expect("manager")
    };
    let (m, other) = (manager().await, manager().await);
    for (mode, opts) in [
        ("fair", LockOptions::fair()),
        ("exclusive", LockOptions::exclusive()),
    ] {
        let owner = m.owner();
        let old = owner.acquire(mode, &opts).await.unwrap();
        server.cmd(&["DEL", &format!("{{tower-lock:{mode}}}")]);
        tokio::time::timeout(lease * 3, old.lost())
            .await
            .expect("the renewal finds the lock gone");
        let new = owner.acquire(mode, &opts).await.unwrap();
        assert_ne!(new.fencing_token(), old.fencing_token());
        let stale = old.release().await;
        assert!(
            matches!(stale, Err(tower_lock::LockError::NotHeld { .. })),
            "{mode}: releasing the lost guard: {stale:?}"
        );
        assert!(
            other.try_acquire(mode, &opts).await.unwrap().is_none(),
            "{mode}: the lost guard's release freed the owner's new hold"
        );
        // several leases later the new hold is still renewed
        tokio::time::sleep(lease * 3).await;
        assert!(!new.is_lost(), "{mode}: the new hold stopped being renewed");
        new.release().await.unwrap();
    }
}
