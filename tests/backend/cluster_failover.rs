//! A waiter on a Redis Cluster is woken by its lock's release after the lock's master failed over
//! (contract 4): the inbox's sharded subscription of the slot must reach the promoted replica,
//! whether the old master died (SIGKILL) or handed over (`CLUSTER FAILOVER`), and whether the
//! waiter began to wait before the failover or after it. Managers keep the default 30 s lease, so
//! a lost wake-up shows as a waiter that sleeps until the holder's lease would have run out.

use std::time::{Duration, Instant};

use tokio::task::JoinHandle;
use tower_lock::{LockError, LockGuard, LockManager, LockOptions};

use crate::support::cluster::Cluster;
use crate::support::{eventually, GENEROUS};

/// The lock of the tests, and its Redis key (for the slot's master).
const KEY: &str = "failover";
const REDIS_KEY: &str = "{tower-lock:failover}";

/// How long after a failover the holder releases (or the waiter comes): long enough for the
/// waiter's retries to end and the inbox to settle into its subscriptions.
const AFTER_FAILOVER: Duration = Duration::from_secs(2);

/// Far below the 30 s lease a missed wake-up would wait for.
const WOKEN_WITHIN: Duration = Duration::from_secs(8);

async fn manager(cluster: &Cluster) -> LockManager {
    LockManager::cluster(cluster.urls())
        .await
        .expect("cluster manager")
}

/// `manager` waits for the lock (a minute at most), trying again when a wait ends with
/// `Unavailable` while the shard is down; yields when it got the lock.
fn wait_for_lock(manager: &LockManager) -> JoinHandle<(Instant, LockGuard)> {
    let manager = manager.clone();
    tokio::spawn(async move {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let opts = LockOptions::exclusive().wait_timeout(left);
            match manager.acquire(KEY, &opts).await {
                Err(LockError::Unavailable { .. }) => {
                    tokio::time::sleep(Duration::from_millis(100)).await
                }
                Ok(guard) => return (Instant::now(), guard),
                Err(err) => panic!("the waiter's wait ended: {err}"),
            }
        }
    })
}

/// `holder` releases `held`; the waiter gets the lock soon after (or before, only if the holder's
/// lease was lost by then), with a higher token.
async fn release_wakes(held: LockGuard, waiting: JoinHandle<(Instant, LockGuard)>) {
    let lost_before = held.is_lost();
    let token = held.fencing_token();
    let released = Instant::now();
    let _ = held.release().await;
    let (acquired, guard) = tokio::time::timeout(GENEROUS * 6, waiting)
        .await
        .expect("the waiter gets the lock")
        .expect("waiter task");
    if acquired < released {
        assert!(
            lost_before,
            "the waiter got the lock while its holder held it"
        );
    } else {
        let late = acquired - released;
        println!("the waiter got the lock {late:?} after its release");
        assert!(
            late < WOKEN_WITHIN,
            "the waiter got the lock {late:?} after its release"
        );
    }
    assert!(guard.fencing_token() > token, "tokens went back");
    guard.release().await.expect("release");
}

/// Wait until a master other than `old_port` serves the lock's slot and the cluster is whole.
fn wait_for_new_master(cluster: &Cluster, old_port: u16) {
    cluster.wait_until("a replica takes over the slot", |c| {
        c.masters().len() == 3 && c.master_of(REDIS_KEY).port() != old_port
    });
    cluster.wait_until("every running node sees the cluster ok", |c| {
        c.nodes.iter().filter(|n| n.is_running()).all(|n| {
            let info = n.try_cmd(&["CLUSTER", "INFO"]).ok();
            let info = info.and_then(|i| i.as_string()).unwrap_or_default();
            info.contains("cluster_state:ok")
        })
    });
}

/// The scenario: B waits from before the kill of the lock's master; A releases after the
/// failover.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_is_woken_after_its_master_is_killed() {
    let mut cluster = Cluster::start();
    let (a, b) = (manager(&cluster).await, manager(&cluster).await);
    let held = a
        .acquire(KEY, &LockOptions::exclusive())
        .await
        .expect("hold");
    let old_port = cluster.master_of(REDIS_KEY).port();
    let waiting = wait_for_lock(&b);
    assert!(eventually(GENEROUS, || b.waiting() == 1).await, "B waits");
    replicated(&cluster, old_port);
    let node = (cluster.nodes.iter_mut())
        .find(|n| n.port() == old_port)
        .expect("the master");
    node.kill();
    wait_for_new_master(&cluster, old_port);
    // A releases a while after the failover, once B waits on the new master
    tokio::time::sleep(AFTER_FAILOVER).await;
    release_wakes(held, waiting).await;
}

/// A variant: the old master hands its slots over (`CLUSTER FAILOVER` on its replica), and B,
/// which had waited in that slot before, waits again only after the failover.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_arriving_after_a_manual_failover_is_woken() {
    let cluster = Cluster::start();
    let (a, b) = (manager(&cluster).await, manager(&cluster).await);
    // B waits in the slot once before the failover: its inbox subscribes the slot's channel
    let held = a
        .acquire(KEY, &LockOptions::exclusive())
        .await
        .expect("hold");
    let waiting = wait_for_lock(&b);
    assert!(eventually(GENEROUS, || b.waiting() == 1).await, "B waits");
    release_wakes(held, waiting).await;

    let old_port = cluster.master_of(REDIS_KEY).port();
    let replica = (cluster.nodes.iter())
        .find(|n| replica_of(n, old_port))
        .expect("the master's replica");
    let reply = replica.cmd(&["CLUSTER", "FAILOVER"]);
    assert!(reply.is_ok(), "{reply:?}");
    wait_for_new_master(&cluster, old_port);
    tokio::time::sleep(AFTER_FAILOVER).await;

    let held = a
        .acquire(KEY, &LockOptions::exclusive())
        .await
        .expect("hold");
    let waiting = wait_for_lock(&b);
    assert!(eventually(GENEROUS, || b.waiting() == 1).await, "B waits");
    release_wakes(held, waiting).await;
}

/// Whether `node` replicates the master on `master_port`.
fn replica_of(node: &crate::support::RedisServer, master_port: u16) -> bool {
    let role = node.cmd(&["ROLE"]);
    let Some(role) = role.as_array() else {
        return false;
    };
    role.first().and_then(|r| r.as_string()).as_deref() == Some("slave")
        && role.get(2).and_then(|p| p.as_int()) == Some(i64::from(master_port))
}

/// Wait until the replicas of the master on `port` have every write it took so far (A's hold
/// and B's waiting record): a failover to a replica that lacks a hold is another matter.
fn replicated(cluster: &Cluster, port: u16) {
    let master = (cluster.nodes.iter())
        .find(|n| n.port() == port)
        .expect("the master");
    let role = master.cmd(&["ROLE"]);
    let offset = role
        .as_array()
        .and_then(|r| r.get(1)?.as_int())
        .expect("offset");
    cluster.wait_until("the replica has the master's writes", |_| {
        let role = master.cmd(&["ROLE"]);
        let replicas = role
            .as_array()
            .and_then(|r| Some(r.get(2)?.as_array()?.to_vec()));
        replicas.unwrap_or_default().iter().any(|replica| {
            let acked = replica
                .as_strings()
                .and_then(|r| r.get(2)?.parse::<i64>().ok());
            acked.is_some_and(|acked| acked >= offset)
        })
    });
}
