//! Takeover of dead holders on a quorum of three masters: each master ends its own part of a
//! dead holder's hold, and a waiter takes the lock once a majority did; a live holder loses
//! nothing to one master failing, and learns of a cut from a majority before anyone takes over.

use std::time::{Duration, Instant};

use tower_lock::{LockError, LockManager, LockOptions};

use super::live::inbox_client_of;
use super::support::masters::{Masters, NODE_TIMEOUT};
use super::support::RedisServer;
use super::{spawn_child_with_token, wait_for_held, GRACE, LEASE, TAKEOVER_BOUND};

/// A quorum manager on `urls`, with a short takeover grace (`takeover`) or none, and a long
/// lease.
pub(super) async fn quorum_manager<S: Into<String>>(
    urls: impl IntoIterator<Item = S>,
    takeover: bool,
) -> LockManager {
    let builder = LockManager::builder()
        .quorum(urls)
        .lease(LEASE)
        .node_timeout(NODE_TIMEOUT)
        .command_timeout(Duration::from_secs(1));
    let builder = match takeover {
        true => builder.takeover_grace(GRACE),
        false => builder.no_takeover(),
    };
    builder.build().await.expect("quorum manager")
}

/// A quorum holder killed with SIGKILL while a request of another manager waits: the request
/// gets the lock within [`TAKEOVER_BOUND`], though the lease is 30 s, under a higher token.
pub(super) async fn a_killed_quorum_holder_is_taken_over() {
    let masters = Masters::start(3);
    let (holder, token) = spawn_child_with_token(&masters.urls().join(","), "quorum");
    let m = quorum_manager(masters.urls(), true).await;
    let waiter = wait_for_held(&m, LockOptions::exclusive(), LEASE);
    // the waiter is in line (probes find the holder listening) before the holder dies
    tokio::time::sleep(GRACE * 3).await;
    assert!(!waiter.is_finished(), "the live holder was taken over");
    let guard = super::taken_over_once_killed(holder, waiter).await;
    assert!(guard.fencing_token() > token, "token {token} not passed");
    guard.release().await.unwrap();
}

/// `CLIENT KILL` of a live holder's inbox on one master at a time, each master in turn: the
/// other masters keep the hold, the reconnected inbox proves itself again, so neither does the
/// holder count its hold lost nor does anyone take it over.
pub(super) async fn a_quorum_inbox_killed_on_one_master_loses_nothing() {
    let masters = Masters::start(3);
    let holder = quorum_manager(masters.urls(), true).await;
    let other = quorum_manager(masters.urls(), true).await;
    let guard = holder.acquire("held", &LockOptions::exclusive()).await;
    let guard = guard.expect("the holder's lock");
    let waiter = wait_for_held(&other, LockOptions::exclusive(), LEASE);
    for server in &masters.servers {
        let id = inbox_client_of(server, holder.id());
        server.cmd(&["CLIENT", "KILL", "ID", &id]);
        tokio::time::sleep(GRACE * 3).await;
        assert!(!guard.is_lost(), "one master's inbox lost the hold");
        assert!(!waiter.is_finished(), "a live holder was taken over");
    }
    guard.release().await.unwrap();
    let next = waiter.await.unwrap().expect("the released lock");
    next.release().await.unwrap();
}

/// Redis closes a live holder's inbox on two of three masters and refuses it the channel from
/// then on (its ACL user there loses the channel), while its commands still work. The waiter
/// takes the hold over on those two; the holder's `lost()` fired before it did.
pub(super) async fn a_quorum_holder_cut_on_a_majority_is_lost_before_the_takeover() {
    let masters = Masters::start(3);
    let user = ["ACL", "SETUSER", "cut", "on", ">pw", "~*", "&*", "+@all"];
    let cut_on = &masters.servers[..2];
    for server in cut_on {
        server.cmd(&user);
    }
    let cut_url = |server: &RedisServer| format!("redis://cut:pw@127.0.0.1:{}", server.port());
    let mut urls: Vec<String> = cut_on.iter().map(cut_url).collect();
    urls.push(masters.servers[2].url());
    let holder = quorum_manager(urls, true).await;
    let other = quorum_manager(masters.urls(), true).await;
    let guard = holder.acquire("held", &LockOptions::exclusive()).await;
    let guard = guard.expect("the holder's lock");
    let waiter = wait_for_held(&other, LockOptions::exclusive(), LEASE);
    tokio::time::sleep(GRACE * 2).await;
    assert!(!waiter.is_finished(), "a live holder was taken over");
    let cut = Instant::now();
    for server in cut_on {
        server.cmd(&["ACL", "SETUSER", "cut", "resetchannels"]);
    }
    // Which comes first, looked at in this order every 5 ms: `is_lost()` reads the deadline
    // itself, so once the lock was taken over it must read lost.
    let mut lost_at = None;
    let taken = loop {
        if lost_at.is_none() && guard.is_lost() {
            lost_at = Some(Instant::now());
        }
        if waiter.is_finished() {
            break Instant::now();
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    let next = waiter
        .await
        .unwrap()
        .expect("the waiter takes the hold over");
    let lost_at = lost_at.expect("taken over before the holder's lost() fired");
    assert!(lost_at <= taken);
    let took = taken - cut;
    assert!(took < TAKEOVER_BOUND, "taken over after {took:?}");
    assert!(
        took >= GRACE,
        "taken over {took:?} after the cut, within the grace"
    );
    assert!(next.fencing_token() > guard.fencing_token());
    next.release().await.unwrap();
    drop(guard);
}

/// One master frozen (SIGSTOP) for three graces while a hold is held: the holder's inbox there
/// cannot prove itself, but the other two can, so the hold is not lost, and nobody takes it.
pub(super) async fn a_frozen_quorum_master_loses_no_hold() {
    let masters = Masters::start(3);
    let holder = quorum_manager(masters.urls(), true).await;
    let other = quorum_manager(masters.urls(), true).await;
    let guard = holder.acquire("held", &LockOptions::exclusive()).await;
    let guard = guard.expect("the holder's lock");
    let waiter = wait_for_held(&other, LockOptions::exclusive(), LEASE);
    tokio::time::sleep(GRACE * 2).await;
    masters.servers[2].stop_process();
    tokio::time::sleep(GRACE * 3).await;
    let (lost, taken) = (guard.is_lost(), waiter.is_finished());
    masters.servers[2].continue_process();
    assert!(!lost, "a frozen minority lost the hold");
    assert!(!taken, "a live holder was taken over");
    tokio::time::sleep(GRACE * 2).await;
    assert!(!guard.is_lost() && !waiter.is_finished());
    guard.release().await.unwrap();
    let next = waiter.await.unwrap().expect("the released lock");
    next.release().await.unwrap();
}

/// A quorum holder whose manager has takeover off is never taken over, even dead: its lease
/// governs.
pub(super) async fn a_quorum_holder_without_takeover_keeps_its_lease() {
    let masters = Masters::start(3);
    let urls = masters.urls().join(",");
    let (mut holder, _) = spawn_child_with_token(&urls, "quorum no takeover");
    let m = quorum_manager(masters.urls(), true).await;
    holder.kill().expect("SIGKILL the holder");
    holder.wait().expect("reap");
    let opts = LockOptions::exclusive().wait_timeout(GRACE * 8);
    let outcome = m.acquire("held", &opts).await;
    assert!(
        matches!(outcome, Err(LockError::Timeout { .. })),
        "a holder without takeover was taken over: {outcome:?}"
    );
    assert_eq!(masters.holding("held"), 3, "the dead holder's hold went");
}

/// Fifty requests of one manager wait for a live quorum holder: each master gets one probe
/// script call a second for all of them (and the holder's renewal), never one per request.
pub(super) async fn quorum_probes_cost_one_call_per_manager_per_second() {
    let masters = Masters::start(3);
    let holder = quorum_manager(masters.urls(), true).await;
    let m = quorum_manager(masters.urls(), true).await;
    let held = holder.acquire("held", &LockOptions::exclusive()).await;
    let held = held.expect("the holder's lock");
    let waiters: Vec<_> = (0..50)
        .map(|_| {
            let m = m.clone();
            tokio::spawn(async move {
                let opts = LockOptions::exclusive().wait_timeout(LEASE);
                let guard = m.acquire("held", &opts).await.expect("the released lock");
                guard.release().await.expect("release");
            })
        })
        .collect();
    while m.waiting() < 50 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // every request made its one attempt on every master
    tokio::time::sleep(GRACE).await;
    let calls = |server: &RedisServer| server.command_calls("evalsha");
    let before: Vec<u64> = masters.servers.iter().map(calls).collect();
    tokio::time::sleep(Duration::from_secs(3)).await;
    for (server, before) in masters.servers.iter().zip(before) {
        let during = calls(server) - before;
        assert!((2..=5).contains(&during), "{during} script calls in 3 s");
    }
    assert!(
        waiters.iter().all(|w| !w.is_finished()),
        "a live holder was taken over"
    );
    held.release().await.unwrap();
    for waiter in waiters {
        waiter.await.unwrap();
    }
}
