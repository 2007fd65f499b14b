//! Locks on a real Redis Cluster (3 masters, 3 replicas): exclusion and order over keys in every
//! slot, one pub/sub connection per shard master per manager and no polling while many wait, and
//! a master's failover.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tower_lock::{LockError, LockManager, LockOptions};

use crate::support::cluster::Cluster;
use crate::support::{eventually, GENEROUS};

async fn manager(cluster: &Cluster) -> LockManager {
    LockManager::builder()
        .cluster(cluster.urls())
        .lease(Duration::from_secs(3))
        .build()
        .await
        .expect("cluster manager")
}

/// Keys whose slots the three masters share between them.
fn spread_keys(cluster: &Cluster, n: usize) -> Vec<String> {
    // names that need no escaping: the hash tag of `account-7` is `tower-lock:account-7`
    let keys: Vec<String> = (0..n).map(|i| format!("account-{i}")).collect();
    let owners: std::collections::HashSet<u16> = keys
        .iter()
        .map(|k| cluster.master_of(&format!("{{tower-lock:{k}}}")).port())
        .collect();
    assert_eq!(owners.len(), 3, "the keys live on every master");
    keys
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn locks_exclude_and_keep_their_order_on_every_shard() {
    let cluster = Cluster::start();
    let managers = [manager(&cluster).await, manager(&cluster).await];
    let keys = Arc::new(spread_keys(&cluster, 12));
    let inside: Arc<Mutex<HashMap<String, usize>>> = Arc::default();
    let overlaps = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for t in 0..16 {
        let (m, keys, inside, overlaps) = (
            managers[t % 2].clone(),
            keys.clone(),
            inside.clone(),
            overlaps.clone(),
        );
        tasks.push(tokio::spawn(async move {
            for round in 0..20 {
                let key = &keys[(t * 7 + round) % keys.len()];
                // one family per key: even keys exclusive, odd keys fair
                let index = (t * 7 + round) % keys.len();
                let opts = if index % 2 == 0 {
                    LockOptions::exclusive()
                } else {
                    LockOptions::fair()
                };
                let guard = m.acquire(key, &opts).await.expect("acquire");
                let now = {
                    let mut inside = inside.lock().unwrap();
                    let n = inside.entry(key.clone()).or_insert(0);
                    *n += 1;
                    *n
                };
                if now > 1 {
                    overlaps.fetch_add(1, Ordering::SeqCst);
                }
                tokio::time::sleep(Duration::from_millis(1)).await;
                *inside.lock().unwrap().get_mut(key).unwrap() -= 1;
                guard.release().await.expect("release");
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    assert_eq!(overlaps.load(Ordering::SeqCst), 0, "two holders at once");

    // FIFO on one key, waiters of both managers
    let holder = managers[0]
        .acquire("fifo", &LockOptions::fair())
        .await
        .unwrap();
    let order = Arc::new(Mutex::new(Vec::new()));
    let mut waiters = Vec::new();
    for i in 0..10 {
        let (m, order) = (managers[i % 2].clone(), order.clone());
        waiters.push(tokio::spawn(async move {
            let guard = m.acquire("fifo", &LockOptions::fair()).await.unwrap();
            order.lock().unwrap().push(i);
            guard.release().await.unwrap();
        }));
        // the first waits in memory behind the holder of its process (nobody queued in Redis
        // before it), every later one in Redis's queue (the other process queued before it)
        let queue = "{tower-lock:fifo}:ql";
        let node = cluster.master_of(queue);
        let waiting = || {
            let in_redis = node.cmd(&["LLEN", queue]).as_int();
            managers.iter().map(LockManager::waiting).sum::<usize>() == i + 1
                && in_redis == Some(i as i64)
        };
        assert!(eventually(GENEROUS, waiting).await, "waiter {i} waits");
    }
    holder.release().await.unwrap();
    for waiter in waiters {
        waiter.await.unwrap();
    }
    assert_eq!(*order.lock().unwrap(), (0..10).collect::<Vec<_>>());

    // shared locks too
    let read = managers[0]
        .acquire("doc", &LockOptions::read())
        .await
        .unwrap();
    let other_read = managers[1]
        .acquire("doc", &LockOptions::read())
        .await
        .unwrap();
    let write = managers[1]
        .try_acquire("doc", &LockOptions::write())
        .await
        .unwrap();
    assert!(write.is_none());
    read.release().await.unwrap();
    other_read.release().await.unwrap();
}

/// A thousand requests waiting for 30 locks of a live holder: one pub/sub connection per master
/// and manager, and no lock command but the holder probes, one script call per slot waited in
/// each second (one script may touch one slot only).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_waiters_use_one_subscription_per_shard_and_only_probe() {
    let cluster = Cluster::start();
    // the holder's leases are renewed every 10 s: none while the waiters are counted
    let holder = LockManager::cluster(cluster.urls()).await.unwrap();
    let waiter = manager(&cluster).await;
    let keys = spread_keys(&cluster, 30);
    let mut held = Vec::new();
    for key in &keys {
        held.push(
            holder
                .acquire(key, &LockOptions::exclusive())
                .await
                .unwrap(),
        );
    }
    let done = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for i in 0..1000 {
        let (m, key, done) = (waiter.clone(), keys[i % keys.len()].clone(), done.clone());
        tasks.push(tokio::spawn(async move {
            let guard = m.acquire(&key, &LockOptions::exclusive()).await.unwrap();
            done.fetch_add(1, Ordering::SeqCst);
            guard.release().await.unwrap();
        }));
    }
    assert!(eventually(GENEROUS, || waiter.waiting() == 1000).await);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let masters = cluster.masters();
    for master in &masters {
        let subscribers = master.pubsub_clients();
        assert!(
            (1..=2).contains(&subscribers),
            "{subscribers} pub/sub connections on master {} for 2 managers",
            master.port()
        );
    }
    let scripts = || -> u64 { masters.iter().map(|m| m.command_calls("evalsha")).sum() };
    let before = scripts();
    tokio::time::sleep(Duration::from_secs(1)).await;
    // two probe rounds at most in a second, a call per slot each; no other lock command
    let sent = scripts() - before;
    let bound = 2 * keys.len() as u64;
    assert!(
        sent <= bound,
        "{sent} lock commands in a second while 1,000 requests waited for {} locks",
        keys.len()
    );
    let released = Instant::now();
    for guard in held {
        guard.release().await.unwrap();
    }
    for task in tasks {
        tokio::time::timeout(GENEROUS, task)
            .await
            .expect("every waiter got in")
            .unwrap();
    }
    assert_eq!(done.load(Ordering::SeqCst), 1000);
    println!(
        "1000 waiters over 30 keys through in {:?}",
        released.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_over_master_serves_its_locks_again_and_tokens_keep_order() {
    let mut cluster = Cluster::start();
    let (first, second) = (manager(&cluster).await, manager(&cluster).await);
    let held = first
        .acquire("failover", &LockOptions::fair())
        .await
        .unwrap();
    let old_port = cluster.master_of("{tower-lock:failover}").port();
    let waiting = {
        let second = second.clone();
        tokio::spawn(async move {
            // a wait ends with Unavailable while the shard is down: the request tries again
            let deadline = Instant::now() + Duration::from_secs(40);
            loop {
                let opts = LockOptions::fair().wait_timeout(deadline - Instant::now());
                match second.acquire("failover", &opts).await {
                    Err(LockError::Unavailable { .. }) => {
                        tokio::time::sleep(Duration::from_millis(100)).await
                    }
                    guard => return (Instant::now(), guard),
                }
            }
        })
    };
    assert!(eventually(GENEROUS, || second.queued() == 1).await);
    let node = cluster
        .nodes
        .iter_mut()
        .find(|n| n.port() == old_port)
        .unwrap();
    node.kill();
    let killed = Instant::now();
    cluster.wait_until("a replica takes over the slot", |c| {
        c.masters().len() == 3 && c.master_of("{tower-lock:failover}").port() != old_port
    });
    println!("failed over {:?} after the kill", killed.elapsed());
    // a lock on the failed-over shard can be taken again
    let fresh = tokio::time::timeout(
        Duration::from_secs(20),
        second.acquire("failover-fresh", &LockOptions::exclusive()),
    )
    .await
    .expect("a lock of the new master within 20 s")
    .unwrap();
    fresh.release().await.unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let lost_before_release = held.is_lost();
    let token = held.fencing_token();
    let released = Instant::now();
    let _ = held.release().await;
    let (acquired, guard) = waiting.await.unwrap();
    let guard = guard.expect("the waiter gets the lock");
    if acquired < released {
        assert!(
            lost_before_release,
            "the waiter got the lock while its holder held it"
        );
    }
    assert!(guard.fencing_token() > token, "tokens went back");
    guard.release().await.unwrap();
    // quorum mode is for independent masters
    let err = LockManager::quorum(cluster.urls()[..3].to_vec())
        .await
        .err();
    assert!(matches!(err, Some(LockError::Config(_))), "{err:?}");
}

/// Leases of locks on every shard are renewed together (one script call per slot), and a lock
/// deleted on its master is lost while the others are kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leases_on_every_shard_are_renewed_and_a_deleted_one_is_lost() {
    let cluster = Cluster::start();
    let m = LockManager::builder()
        .cluster(cluster.urls())
        .lease(Duration::from_millis(600))
        .build()
        .await
        .unwrap();
    let keys = spread_keys(&cluster, 12);
    let mut guards = Vec::new();
    for (i, key) in keys.iter().enumerate() {
        let opts = match i % 3 {
            0 => LockOptions::exclusive(),
            1 => LockOptions::fair(),
            _ => LockOptions::semaphore(2),
        };
        guards.push(m.acquire(key, &opts).await.unwrap());
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(
        guards.iter().all(|g| !g.is_lost()),
        "renewed past two leases"
    );
    let doomed = format!("{{tower-lock:{}}}", keys[3]);
    cluster.master_of(&doomed).cmd(&["DEL", &doomed]);
    tokio::time::timeout(GENEROUS, guards[3].lost())
        .await
        .expect("the deleted lock is lost");
    tokio::time::sleep(Duration::from_millis(700)).await;
    let kept = guards
        .iter()
        .enumerate()
        .filter(|(i, g)| *i != 3 && !g.is_lost());
    assert_eq!(kept.count(), 11, "the other leases were kept");
}

/// The slot of a held lock moves to another master (a resharding): the holder's lease is renewed
/// on the new owner, and the request waiting for the lock is told of its release there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_whose_slot_moves_keeps_its_holder_and_wakes_its_waiter() {
    let cluster = Cluster::start();
    let (holder, waiter) = (manager(&cluster).await, manager(&cluster).await);
    let held = holder
        .acquire("moving", &LockOptions::exclusive())
        .await
        .unwrap();
    let waiting = {
        let waiter = waiter.clone();
        tokio::spawn(async move {
            let opts = LockOptions::exclusive().wait_timeout(Duration::from_secs(30));
            waiter.acquire("moving", &opts).await
        })
    };
    assert!(eventually(GENEROUS, || waiter.waiting() == 1).await);
    let moved_to = cluster.move_slot_of("{tower-lock:moving}");
    assert_eq!(cluster.master_of("{tower-lock:moving}").port(), moved_to);
    // the lease (3 s) is renewed on the new owner
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert!(
        !held.is_lost(),
        "the holder lost its lock when the slot moved"
    );
    let token = held.fencing_token();
    let released = Instant::now();
    held.release().await.unwrap();
    let next = tokio::time::timeout(GENEROUS, waiting)
        .await
        .expect("the waiter got the lock")
        .unwrap()
        .unwrap();
    // told by the release, not by its timer (the holder's lease had 3 s to run)
    println!(
        "the waiter got the lock {:?} after the release",
        released.elapsed()
    );
    assert!(
        released.elapsed() < Duration::from_secs(1),
        "{:?}",
        released.elapsed()
    );
    assert!(next.fencing_token() > token);
    next.release().await.unwrap();
}

/// CRC16-XMODEM modulo 16384: the slot of a hash tag.
fn slot_of(tag: &str) -> u16 {
    let crc = tag.bytes().fold(0u16, |crc, byte| {
        (0..8).fold(crc ^ (u16::from(byte) << 8), |crc, _| {
            if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            }
        })
    });
    crc % 16384
}

/// While a slot is being moved, Redis refuses the scripts of a lock of that slot whose keys are
/// not on one node yet (TRYAGAIN). A request that waits keeps waiting through the move and gets
/// the lock once it is done; one that does not wait is told the backend cannot serve it now.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_lock_waits_while_its_slot_moves() {
    let cluster = Cluster::start();
    let m = manager(&cluster).await;
    let old = m
        .acquire("moving-old", &LockOptions::exclusive())
        .await
        .unwrap();
    let slot = slot_of("tower-lock:moving-old");
    let new_name = (0..)
        .map(|i| format!("moving-{i}"))
        .find(|name| slot_of(&format!("tower-lock:{name}")) == slot)
        .unwrap();
    let moving = cluster.start_moving_slot_of("{tower-lock:moving-old}");
    let tried = m.try_acquire(&new_name, &LockOptions::exclusive()).await;
    assert!(
        matches!(tried, Err(LockError::Unavailable { .. })),
        "{tried:?}"
    );
    let waiting = {
        let (m, name) = (m.clone(), new_name.clone());
        tokio::spawn(async move {
            let opts = LockOptions::fair().wait_timeout(Duration::from_secs(30));
            m.acquire(&name, &opts).await
        })
    };
    // longer than the command timeout (2 s): the request still waits
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(!waiting.is_finished(), "{:?}", waiting.await);
    cluster.finish_moving(&moving);
    let new = tokio::time::timeout(GENEROUS, waiting)
        .await
        .expect("the lock once the move is done")
        .unwrap()
        .unwrap();
    old.release().await.unwrap();
    new.release().await.unwrap();
}
