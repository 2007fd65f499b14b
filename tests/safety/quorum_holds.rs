//! Quorum: a release, an undo or a late reply acts only on the hold it belongs to, on every
//! master — never on a later hold of the same owner.

use std::time::Duration;

use tower_lock::{LockError, LockManager, LockOptions};

use super::support::masters::Masters;
use super::support::{eventually, GENEROUS};

async fn manager(masters: &Masters) -> LockManager {
    LockManager::builder()
        .quorum(masters.urls())
        .node_timeout(Duration::from_secs(3))
        .command_timeout(Duration::from_secs(3))
        .build()
        .await
        .unwrap()
}

/// G1's lock is deleted on every master; its owner takes the lock again (G2, a new token). G1's
/// release must report NotHeld and leave G2's hold on every master (before, it answered Ok and
/// deleted G2's hold everywhere: another manager took the lock at once).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_guards_release_leaves_the_owners_later_hold() {
    let masters = Masters::start(3);
    let (m, other) = (manager(&masters).await, manager(&masters).await);
    let opts = LockOptions::exclusive();
    let owner = m.owner();
    let g1 = owner.acquire("k", &opts).await.unwrap();
    assert!(
        eventually(GENEROUS, || masters.holding("k") == 3).await,
        "every master granted G1"
    );
    for server in &masters.servers {
        server.cmd(&["DEL", "{tower-lock:k}"]);
    }
    let g2 = owner.acquire("k", &opts).await.unwrap();
    assert_ne!(g2.fencing_token(), g1.fencing_token(), "a new hold");
    let released = g1.release().await;
    assert!(
        matches!(released, Err(LockError::NotHeld { .. })),
        "the lost guard's release: {released:?}"
    );
    assert_eq!(
        masters.holding("k"),
        3,
        "G2's hold was removed from masters"
    );
    assert!(other.try_acquire("k", &opts).await.unwrap().is_none());
    assert!(!g2.is_lost());
    g2.release().await.unwrap();
    assert!(
        eventually(GENEROUS, || { masters.holding("k") == 0 }).await,
        "no master holds the lock after G2's release"
    );
    assert!(other.try_acquire("k", &opts).await.unwrap().is_some());
}

/// Master 2 is frozen while an owner takes the lock (G1, decided by masters 0 and 1), releases
/// it, and takes it again (G2). Master 2 then runs all three in order; G1's late grant must not
/// be counted as part of G2 (it is undone), and G2's own late grant must be released with G2:
/// afterwards no master holds the lock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_grant_settles_into_the_hold_of_its_own_attempt() {
    let masters = Masters::start(3);
    let (m, other) = (manager(&masters).await, manager(&masters).await);
    let opts = LockOptions::exclusive();
    let owner = m.owner();
    masters.servers[2].stop_process();
    let g1 = owner.acquire("k", &opts).await.unwrap();
    g1.release().await.unwrap();
    let g2 = owner.acquire("k", &opts).await.unwrap();
    masters.servers[2].continue_process();
    assert!(
        eventually(GENEROUS, || {
            masters.servers[2]
                .try_cmd(&["HGET", "{tower-lock:k}", "#t"])
                .ok()
                .and_then(|r| r.as_int())
                .is_some()
        })
        .await,
        "master 2 ran the three calls"
    );
    assert!(other.try_acquire("k", &opts).await.unwrap().is_none());
    g2.release().await.unwrap();
    assert!(
        eventually(GENEROUS, || { masters.holding("k") == 0 }).await,
        "no master holds the lock after G2's release"
    );
}

/// G1 is deleted on masters 0 and 1 only; master 2 keeps it. The owner takes the lock again (G2:
/// fresh on 0 and 1, a re-entry on 2): G1's part on master 2 is dropped, so that G2's release
/// leaves nothing behind (before the change, master 2 kept G1's hold for a whole lease).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_hold_kept_by_one_master_goes_when_the_owner_takes_the_lock_again() {
    let masters = Masters::start(3);
    let m = manager(&masters).await;
    let opts = LockOptions::exclusive();
    let owner = m.owner();
    let g1 = owner.acquire("k", &opts).await.unwrap();
    assert!(
        eventually(GENEROUS, || masters.holding("k") == 3).await,
        "every master granted G1"
    );
    for server in &masters.servers[..2] {
        server.cmd(&["DEL", "{tower-lock:k}"]);
    }
    let g2 = owner.acquire("k", &opts).await.unwrap();
    assert_ne!(g2.fencing_token(), g1.fencing_token(), "a new hold");
    assert!(matches!(g1.release().await, Err(LockError::NotHeld { .. })));
    g2.release().await.unwrap();
    assert!(
        eventually(GENEROUS, || { masters.holding("k") == 0 }).await,
        "no master holds the lock after G2's release"
    );
}

/// Every master refuses an attempt with an error (out of memory), so the attempt is undone in the
/// background. The owner's next attempt (G2) sends its calls before that undo runs: the undo must
/// leave G2's hold alone. Before, it released by owner: G2's hold was gone from every master,
/// another manager took the lock under G2, and G2's release was NotHeld.
#[test]
fn an_undo_of_a_failed_attempt_leaves_the_next_attempts_hold() {
    let masters = Masters::start(3);
    // On one thread, background work runs only when a request waits: the next attempt's calls go
    // out before the undo's, as they can on a busy machine.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let _in_runtime = rt.enter();
    let (m, other) = rt.block_on(async { (manager(&masters).await, manager(&masters).await) });
    let opts = LockOptions::exclusive();
    let owner = m.owner();
    set_maxmemory(&masters, "1");
    let refused = rt.block_on(owner.try_acquire("k", &opts));
    assert!(
        matches!(refused, Err(LockError::Unavailable { .. })),
        "every master refused: {refused:?}"
    );
    set_maxmemory(&masters, "0");
    let g2 = rt.block_on(owner.try_acquire("k", &opts)).unwrap();
    let g2 = g2.expect("the lock is free");
    rt.block_on(tokio::time::sleep(Duration::from_millis(300)));
    assert_eq!(
        masters.holding("k"),
        3,
        "G2's hold was removed from masters"
    );
    let taken = rt.block_on(other.try_acquire("k", &opts)).unwrap();
    assert!(taken.is_none(), "another manager took the lock under G2");
    assert!(!g2.is_lost());
    rt.block_on(g2.release()).unwrap();
}

fn set_maxmemory(masters: &Masters, bytes: &str) {
    set_maxmemory_on(&masters.servers, bytes);
}

/// Master 2 lost its scripts and is frozen while an attempt fails on the others (out of memory).
/// Its answer there ("no such script") waits unread, and the call goes again only after the
/// owner's next attempt (G2) took the lock there: the late call must leave G2's hold alone.
/// Before, it took G2's hold for one the owner had let go (a restart from a snapshot), took the
/// lock afresh, and its undo left master 2 free under G2.
#[test]
fn a_late_call_of_a_failed_attempt_leaves_the_next_attempts_hold() {
    let masters = Masters::start(3);
    // One thread: between `block_on` calls this manager reads nothing. The other manager runs
    // apart, so that its calls load the scripts on master 2 meanwhile.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let apart = tokio::runtime::Runtime::new().unwrap();
    let m = rt.block_on(manager(&masters));
    let other = apart.block_on(manager(&masters));
    let opts = LockOptions::exclusive();
    let owner = m.owner();
    let warm = rt.block_on(owner.try_acquire("warm", &opts)).unwrap();
    rt.block_on(warm.expect("a free lock").release()).unwrap();
    let late = &masters.servers[2];
    late.cmd(&["SCRIPT", "FLUSH"]);
    let calls = late.command_calls("evalsha");
    late.stop_process();
    set_maxmemory_on(&masters.servers[..2], "1");
    let refused = rt.block_on(owner.try_acquire("k", &opts));
    assert!(
        matches!(refused, Err(LockError::Unavailable { .. })),
        "the attempt failed: {refused:?}"
    );
    rt.block_on(async { tokio::time::sleep(Duration::from_millis(100)).await });
    set_maxmemory_on(&masters.servers[..2], "0");
    late.continue_process();
    let ran = apart.block_on(eventually(GENEROUS, || {
        late.command_calls("evalsha") > calls
    }));
    assert!(ran, "master 2 answered the failed attempt's call");
    let elsewhere = apart
        .block_on(other.try_acquire("elsewhere", &opts))
        .unwrap();
    apart
        .block_on(elsewhere.expect("a free lock").release())
        .unwrap();
    let g2 = rt.block_on(owner.try_acquire("k", &opts)).unwrap();
    let g2 = g2.expect("the lock is free");
    rt.block_on(async { tokio::time::sleep(Duration::from_millis(300)).await });
    assert_eq!(masters.holding("k"), 3, "G2's hold left a master");
    let taken = apart.block_on(other.try_acquire("k", &opts)).unwrap();
    assert!(taken.is_none(), "another manager took the lock under G2");
    rt.block_on(g2.release()).unwrap();
}

fn set_maxmemory_on(servers: &[super::support::RedisServer], bytes: &str) {
    for server in servers {
        let reply = server.cmd(&["CONFIG", "SET", "maxmemory", bytes]);
        assert!(reply.is_ok(), "{reply:?}");
    }
}
