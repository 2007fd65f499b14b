//! Live holders whose inbox connection Redis closed: a reconnection within the grace keeps the
//! hold (no takeover, no `lost()`); an inbox kept away gets the hold taken over, but only after
//! the holder's `lost()` fired.

use std::time::{Duration, Instant};

use tower_lock::{LockManager, LockOptions};

use super::support::proxy::Proxy;
use super::support::RedisServer;
use super::{manager, wait_for_held, GRACE, LEASE, TAKEOVER_BOUND};

/// The client id of the inbox (the pub/sub connection) of `m`.
fn inbox_client(server: &RedisServer, m: &LockManager) -> String {
    inbox_client_of(server, m.id())
}

/// The client id of the inbox of the manager whose id is `manager`.
pub(super) fn inbox_client_of(server: &RedisServer, manager: &str) -> String {
    let list = server.cmd(&["CLIENT", "LIST", "TYPE", "pubsub"]);
    let list = list.as_string().expect("CLIENT LIST");
    let name = format!("name=tower-lock:{manager}");
    let line = (list.lines())
        .find(|line| line.split(' ').any(|field| field == name))
        .unwrap_or_else(|| panic!("no inbox of {manager} in {list}"));
    let id = line.split(' ').find_map(|field| field.strip_prefix("id="));
    id.expect("client id").to_owned()
}

/// `CLIENT KILL` of a live holder's inbox: it reconnects within milliseconds and the watchdog
/// renews at once, so nobody takes the hold over and its `lost()` never fires.
pub(super) async fn an_inbox_reconnected_within_the_grace_keeps_the_hold() {
    let server = RedisServer::start();
    let (holder, other) = (manager(&server.url()).await, manager(&server.url()).await);
    let guard = holder
        .acquire("held", &LockOptions::exclusive())
        .await
        .unwrap();
    let waiter = wait_for_held(&other, LockOptions::exclusive(), LEASE);
    for _ in 0..3 {
        let id = inbox_client(&server, &holder);
        server.cmd(&["CLIENT", "KILL", "ID", &id]);
        tokio::time::sleep(GRACE * 3).await;
        assert!(!guard.is_lost(), "a reconnected holder lost its hold");
        assert!(!waiter.is_finished(), "a live holder was taken over");
    }
    guard.release().await.unwrap();
    let next = waiter
        .await
        .unwrap()
        .expect("the waiter gets the released lock");
    next.release().await.unwrap();
}

/// Redis closes a live holder's inbox and refuses it the channel from then on (its ACL user
/// loses the channel), while its commands still work. The waiter takes the hold over after the
/// grace; by then the holder's `lost()` has fired. `opts`: exclusive, or a write of a read/write
/// lock (whose holders each have a mark of their own).
pub(super) async fn a_holder_cut_from_its_inbox_is_lost_before_the_takeover(opts: LockOptions) {
    let server = RedisServer::start();
    let user = ["ACL", "SETUSER", "cut", "on", ">pw", "~*", "&*", "+@all"];
    server.cmd(&user);
    let url = format!("redis://cut:pw@127.0.0.1:{}", server.port());
    let holder = manager(&url).await;
    let other = manager(&server.url()).await;
    let guard = holder.acquire("held", &opts).await.unwrap();
    let waiter = wait_for_held(&other, opts, LEASE);
    tokio::time::sleep(GRACE * 2).await;
    assert!(!waiter.is_finished(), "a live holder was taken over");
    // Redis disconnects the subscriber whose channels were taken away
    server.cmd(&["ACL", "SETUSER", "cut", "resetchannels"]);
    let cut = Instant::now();
    // a probe marks the missing holder first; the takeover comes a grace after that mark
    let marked = loop {
        assert!(!waiter.is_finished(), "taken over without a mark");
        let marks = server.cmd(&["KEYS", "*:d*"]).as_strings().expect("KEYS");
        if !marks.is_empty() {
            break Instant::now();
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    let next = waiter
        .await
        .unwrap()
        .expect("the waiter takes the hold over");
    let after_mark = marked.elapsed();
    assert!(
        after_mark >= GRACE - Duration::from_millis(100),
        "taken over {after_mark:?} after the first miss"
    );
    assert!(
        guard.is_lost(),
        "taken over before the holder's lost() fired"
    );
    let took = cut.elapsed();
    assert!(took < TAKEOVER_BOUND, "taken over after {took:?}");
    assert!(took < LEASE / 2, "the lease ran out instead: {took:?}");
    next.release().await.unwrap();
    drop(guard);
}

/// A partition between a live holder and Redis: Redis sees its inbox still subscribed, so nobody
/// takes it over, and the lock passes on only when its lease runs out. The holder, which can no
/// longer prove its inbox, counts its hold lost after the grace.
pub(super) async fn a_partitioned_holder_is_not_taken_over() {
    let server = RedisServer::start();
    let proxy = Proxy::start(server.port());
    let lease = Duration::from_secs(4);
    let holder = LockManager::builder()
        .redis(proxy.url())
        .lease(lease)
        .takeover_grace(GRACE)
        .build()
        .await
        .expect("manager through the proxy");
    let other = manager(&server.url()).await;
    let guard = holder
        .acquire("held", &LockOptions::exclusive())
        .await
        .unwrap();
    let waiter = wait_for_held(&other, LockOptions::exclusive(), LEASE);
    tokio::time::sleep(GRACE * 2).await;
    proxy.blackhole();
    let cut = Instant::now();
    tokio::time::sleep(GRACE * 4).await;
    assert!(
        guard.is_lost(),
        "a holder that cannot prove its inbox kept its hold"
    );
    assert!(!waiter.is_finished(), "a partitioned holder was taken over");
    let next = waiter.await.unwrap().expect("the lease runs out");
    // renewed every lease/3 before the cut: the lease ran out 2/3 of a lease after it at least
    let took = cut.elapsed();
    assert!(took >= lease * 2 / 3, "passed on {took:?} after the cut");
    next.release().await.unwrap();
    proxy.heal();
    drop(guard);
}

/// A fair grant whose claim its watchdog has not extended yet, when Redis closes the new
/// holder's inbox: the reconnection extends the claim at once, so the grant is neither lost nor
/// taken over.
pub(super) async fn a_fresh_fair_grant_survives_an_inbox_reconnection() {
    let server = RedisServer::start();
    let (first, second) = (manager(&server.url()).await, manager(&server.url()).await);
    let held = first.acquire("held", &LockOptions::fair()).await.unwrap();
    let waiter = wait_for_held(&second, LockOptions::fair(), LEASE);
    while second.queued() == 0 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    held.release().await.unwrap();
    let granted = waiter.await.unwrap().expect("the grant");
    // at once, before a heartbeat round extends the claim
    let id = inbox_client(&server, &second);
    server.cmd(&["CLIENT", "KILL", "ID", &id]);
    tokio::time::sleep(GRACE * 3).await;
    assert!(
        !granted.is_lost(),
        "a reconnected grant counted itself lost"
    );
    granted.release().await.unwrap();
}

/// `CLIENT KILL` of the inbox of a holder whose hold has a fixed lease (the watchdog never
/// renews it): the renewal round after the reconnection still deletes its mark and moves its
/// takeover deadline on, so it is neither lost nor taken over.
pub(super) async fn a_fixed_lease_hold_survives_an_inbox_reconnection() {
    let server = RedisServer::start();
    let (holder, other) = (manager(&server.url()).await, manager(&server.url()).await);
    let fixed = LockOptions::exclusive().lease(LEASE);
    let guard = holder.acquire("held", &fixed).await.unwrap();
    let waiter = wait_for_held(&other, LockOptions::exclusive(), LEASE);
    for _ in 0..2 {
        let id = inbox_client(&server, &holder);
        server.cmd(&["CLIENT", "KILL", "ID", &id]);
        tokio::time::sleep(GRACE * 3).await;
        assert!(
            !guard.is_lost(),
            "a reconnected fixed-lease hold counted itself lost"
        );
        assert!(!waiter.is_finished(), "a live holder was taken over");
    }
    guard.release().await.unwrap();
    let next = waiter
        .await
        .unwrap()
        .expect("the waiter gets the released lock");
    next.release().await.unwrap();
}
