//! Takeover of dead holders on a Redis Cluster: a holder subscribes its channel of the lock's slot
//! before it takes the lock, a waiter's probe finds that channel missing once the holder died
//! (`SHARDNUMSUB`), and a live holder proves the channel by echo, so that it learns of a cut
//! before anyone takes it over.

use std::time::{Duration, Instant};

use tower_lock::{LockGuard, LockManager, LockOptions};

use super::support::cluster::Cluster;
use super::{spawn_child_with_token, wait_for_held, Test, GRACE, LEASE, TAKEOVER_BOUND};

/// The cluster tests of this binary.
pub(super) fn tests() -> Vec<(&'static str, Test)> {
    vec![
        ("a_killed_cluster_holder_is_taken_over", || {
            Box::pin(a_killed_cluster_holder_is_taken_over())
        }),
        ("a_stopped_cluster_holder_is_not_taken_over", || {
            Box::pin(a_stopped_cluster_holder_is_not_taken_over())
        }),
        ("a_cluster_holder_proves_its_slot_by_echo", || {
            Box::pin(a_cluster_holder_proves_its_slot_by_echo())
        }),
        (
            "a_cluster_holder_reconnected_within_the_grace_keeps_it",
            || Box::pin(a_cluster_holder_reconnected_within_the_grace_keeps_it()),
        ),
        ("a_cluster_holder_cut_from_its_slot_is_lost_first", || {
            Box::pin(a_cluster_holder_cut_from_its_slot_is_lost_first())
        }),
        #[cfg(feature = "axum")]
        (
            "a_request_through_the_layer_gets_a_killed_cluster_holders_lock",
            || {
                Box::pin(
                    super::layer::a_request_through_the_layer_gets_a_killed_cluster_holders_lock(),
                )
            },
        ),
    ]
}

/// The grace of the reconnection test: a cluster client whose every connection was killed
/// reconnected and resubscribed past 750 ms beside other test binaries once, and a reconnection
/// past the grace is a cut, not what that test is about.
const RECONNECT_GRACE: Duration = Duration::from_secs(2);

/// A cluster manager on `seeds` with the tests' takeover grace and a long lease.
pub(super) async fn cluster_manager<S: Into<String>>(
    seeds: impl IntoIterator<Item = S>,
) -> LockManager {
    cluster_manager_with(seeds, GRACE).await
}

async fn cluster_manager_with<S: Into<String>>(
    seeds: impl IntoIterator<Item = S>,
    grace: Duration,
) -> LockManager {
    LockManager::builder()
        .cluster(seeds)
        .lease(LEASE)
        .takeover_grace(grace)
        .build()
        .await
        .expect("cluster manager")
}

/// The URLs of the cluster's nodes for the ACL user `cut` (see [`add_cut_user`]).
fn cut_urls(cluster: &Cluster) -> Vec<String> {
    let port = |url: &String| url.rsplit(':').next().unwrap_or_default().to_owned();
    let urls = cluster.urls();
    urls.iter()
        .map(|url| format!("redis://cut:pw@127.0.0.1:{}", port(url)))
        .collect()
}

/// On every node, the user `cut`, allowed everything; `args` change it afterwards.
fn set_cut_user(cluster: &Cluster, args: &[&str]) {
    for node in &cluster.nodes {
        let mut cmd = vec!["ACL", "SETUSER", "cut"];
        cmd.extend_from_slice(args);
        node.cmd(&cmd);
    }
}

fn add_cut_user(cluster: &Cluster) {
    set_cut_user(cluster, &["on", ">pw", "~*", "&*", "+@all"]);
}

/// A cluster holder killed with SIGKILL while a request of another manager waits: the request
/// gets the lock within [`TAKEOVER_BOUND`] (the lease is 30 s), under a higher token; while the
/// holder lived, nobody took it over.
async fn a_killed_cluster_holder_is_taken_over() {
    let cluster = Cluster::start();
    let (holder, token) = spawn_child_with_token(&cluster.urls().join(","), "cluster");
    let m = cluster_manager(cluster.urls()).await;
    let waiter = wait_for_held(&m, LockOptions::exclusive(), LEASE);
    tokio::time::sleep(GRACE * 3).await;
    assert!(!waiter.is_finished(), "the live holder was taken over");
    let guard = super::taken_over_once_killed(holder, waiter).await;
    assert!(guard.fencing_token() > token, "token {token} not passed");
    guard.release().await.unwrap();
}

/// A cluster holder frozen with SIGSTOP keeps its connections open: Redis still sees its channel
/// subscribed, so nobody takes it over through eight graces; killed, it is taken over.
async fn a_stopped_cluster_holder_is_not_taken_over() {
    let cluster = Cluster::start();
    let (holder, _) = spawn_child_with_token(&cluster.urls().join(","), "cluster");
    let m = cluster_manager(cluster.urls()).await;
    let waiter = wait_for_held(&m, LockOptions::exclusive(), LEASE);
    super::kept_while_stopped(holder, waiter).await;
}

/// A hold kept for six graces with nobody waiting: its slot's channel proves itself by echo
/// (SPUBLISH to itself), so its `lost()` never fires; back-to-back holds of 5 ms send none.
async fn a_cluster_holder_proves_its_slot_by_echo() {
    let cluster = Cluster::start();
    let m = cluster_manager(cluster.urls()).await;
    let master = cluster.master_of("{tower-lock:held}");
    let guard = m.acquire("held", &LockOptions::exclusive()).await.unwrap();
    master.cmd(&["CONFIG", "RESETSTAT"]);
    tokio::time::sleep(GRACE * 6).await;
    assert!(
        !guard.is_lost(),
        "a live cluster holder counted itself lost"
    );
    let echoes = master.command_calls("spublish");
    assert!(echoes >= 6, "{echoes} echoes in six graces");
    guard.release().await.unwrap();
    master.cmd(&["CONFIG", "RESETSTAT"]);
    let end = Instant::now() + Duration::from_secs(2);
    while Instant::now() < end {
        let guard = m.acquire("held", &LockOptions::exclusive()).await.unwrap();
        tokio::time::sleep(Duration::from_millis(5)).await;
        guard.release().await.unwrap();
    }
    let echoes = master.command_calls("spublish");
    assert_eq!(echoes, 0, "echoes for holds of 5 ms");
}

/// A holder as the ACL user `cut` (see [`add_cut_user`]) holds "held"; a request of another
/// manager waits for it.
struct CutHolder {
    cluster: Cluster,
    _managers: (LockManager, LockManager),
    guard: LockGuard,
    waiter: tokio::task::JoinHandle<Result<LockGuard, tower_lock::LockError>>,
}

impl CutHolder {
    /// Both managers with takeover after `grace`.
    async fn start(grace: Duration) -> CutHolder {
        let cluster = Cluster::start();
        add_cut_user(&cluster);
        let holder = cluster_manager_with(cut_urls(&cluster), grace).await;
        let other = cluster_manager_with(cluster.urls(), grace).await;
        let guard = holder.acquire("held", &LockOptions::exclusive()).await;
        let guard = guard.expect("the holder's lock");
        let waiter = wait_for_held(&other, LockOptions::exclusive(), LEASE);
        CutHolder {
            cluster,
            _managers: (holder, other),
            guard,
            waiter,
        }
    }
}

/// `CLIENT KILL` of every connection of a live holder on its slot's master, three times: the
/// inbox resubscribes within the grace and the watchdog renews, so nobody takes the hold over
/// and its `lost()` never fires.
async fn a_cluster_holder_reconnected_within_the_grace_keeps_it() {
    let CutHolder {
        cluster,
        _managers,
        guard,
        waiter,
    } = CutHolder::start(RECONNECT_GRACE).await;
    let master = cluster.master_of("{tower-lock:held}");
    for _ in 0..3 {
        master.cmd(&["CLIENT", "KILL", "USER", "cut"]);
        tokio::time::sleep(RECONNECT_GRACE * 2).await;
        assert!(!guard.is_lost(), "a reconnected holder lost its hold");
        assert!(!waiter.is_finished(), "a live holder was taken over");
    }
    guard.release().await.unwrap();
    let next = waiter.await.unwrap().expect("the released lock");
    next.release().await.unwrap();
}

/// Redis closes a live holder's subscriptions and refuses it the channels from then on (its ACL
/// user loses them on every node), while its commands still work. The waiter takes the hold
/// over once its probes saw the channel missing for the grace; by then the holder's `lost()`
/// has fired.
async fn a_cluster_holder_cut_from_its_slot_is_lost_first() {
    let CutHolder {
        cluster,
        _managers,
        guard,
        waiter,
    } = CutHolder::start(GRACE).await;
    tokio::time::sleep(GRACE * 2).await;
    assert!(!waiter.is_finished(), "a live holder was taken over");
    set_cut_user(&cluster, &["resetchannels"]);
    let cut = Instant::now();
    let next = waiter
        .await
        .unwrap()
        .expect("the waiter takes the hold over");
    assert!(
        guard.is_lost(),
        "taken over before the holder's lost() fired"
    );
    let took = cut.elapsed();
    assert!(took >= GRACE, "taken over {took:?} after the cut");
    assert!(took < TAKEOVER_BOUND, "taken over after {took:?}");
    next.release().await.unwrap();
}
