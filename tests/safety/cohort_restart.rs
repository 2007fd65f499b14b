//! Redis restarts while a partition hides it from one process: that process's connections look
//! open, no drop is seen. Another process takes the lock from the restarted server under a token
//! above the block the first process reserved. A hand-off in memory (a cohort's next request, a
//! read joining its group) must not hand out a token of that forgotten block: it needs a recent
//! word of the server on the hold, which the partition withholds. Restarted empty, and from a
//! snapshot taken before the hold (a restart that lost its last writes).

use std::time::Duration;

use tower_lock::{LockError, LockGuard, LockManager, LockOptions};

use super::support;
use support::proxy::Proxy;
use support::RedisServer;

/// How the server comes back.
#[derive(Clone, Copy, Debug)]
enum Restart {
    /// Empty.
    Empty,
    /// From a snapshot saved before the hold was taken: it lost the last writes.
    FromOldSnapshot,
}

/// The process behind the proxy: a long lease (no renewal runs during the test), commands that
/// give up after a second.
async fn partitioned_manager(proxy: &Proxy) -> LockManager {
    LockManager::builder()
        .redis(proxy.url())
        .lease(Duration::from_secs(30))
        .command_timeout(Duration::from_secs(1))
        .build()
        .await
        .expect("manager")
}

/// The other process, straight to the server.
async fn other_manager(server: &RedisServer) -> LockManager {
    LockManager::builder()
        .redis(server.url())
        .build()
        .await
        .expect("manager")
}

/// Partition the proxy, restart the server as `restart` says, and let `other` take `key` with
/// `opts` at once: its guard.
async fn restart_behind_a_partition(
    server: &mut RedisServer,
    proxy: &Proxy,
    other: &LockManager,
    key: &str,
    opts: &LockOptions,
    restart: Restart,
) -> LockGuard {
    proxy.blackhole();
    match restart {
        Restart::Empty => server.restart(),
        Restart::FromOldSnapshot => server.restart_from_files(&[]),
    }
    for _ in 0..100 {
        if let Ok(Some(guard)) = other.try_acquire(key, opts).await {
            return guard;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the other process could not take the forgotten lock");
}

/// What a request of the partitioned process got: no lock (Redis was unreachable), or a lock
/// under a token above the other process's. Never a token below it.
fn check_after(got: &Result<LockGuard, LockError>, others: u64, what: &str) {
    match got {
        Ok(guard) => assert!(
            guard.fencing_token() > others,
            "{what}: token {} handed out after the other process's {others}",
            guard.fencing_token()
        ),
        Err(err) => assert!(err.is_unavailable(), "{what}: {err:?}"),
    }
}

/// A cohort's holder releases while the partition hides the restart; the next request of its
/// cohort waits for it.
async fn cohort_hand_off(opts: LockOptions, restart: Restart) {
    let mut server = RedisServer::start();
    let proxy = Proxy::start(server.port());
    let (m, other) = (
        partitioned_manager(&proxy).await,
        other_manager(&server).await,
    );
    if let Restart::FromOldSnapshot = restart {
        assert!(server.cmd(&["SAVE"]).is_ok());
    }
    let held = m.acquire("h", &opts).await.unwrap();
    let next = tokio::spawn({
        let (m, opts) = (m.clone(), opts.wait_timeout(Duration::from_secs(10)));
        async move { m.acquire("h", &opts).await }
    });
    assert!(support::eventually(Duration::from_secs(5), || m.waiting() == 1).await);
    let write = restart_behind_a_partition(&mut server, &proxy, &other, "h", &opts, restart).await;
    let others = write.fencing_token();
    assert!(others > held.fencing_token() + 63, "test premise");
    // the holder goes, as a handler's guard does: the next request's turn
    drop(held);
    tokio::time::sleep(Duration::from_millis(300)).await;
    if next.is_finished() {
        let got = next.await.unwrap();
        check_after(&got, others, &format!("{opts:?} {restart:?} hand-off"));
        proxy.heal();
        write.release().await.unwrap();
        return;
    }
    // still waiting (for Redis): after the heal it gets the lock there
    proxy.heal();
    write.release().await.unwrap();
    let got = tokio::time::timeout(Duration::from_secs(15), next)
        .await
        .expect("the next request's wait ended")
        .unwrap();
    check_after(&got, others, &format!("{opts:?} {restart:?} hand-off"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_exclusive_hand_off_after_a_hidden_empty_restart() {
    cohort_hand_off(LockOptions::exclusive(), Restart::Empty).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_cohort_order_hand_off_after_a_hidden_restart_from_an_old_snapshot() {
    let opts = LockOptions::fair().cohort_order();
    cohort_hand_off(opts, Restart::FromOldSnapshot).await;
}

/// A read group holds while the partition hides the restart, and the other process writes the
/// lock; a new read of the group's process must not join the forgotten hold.
async fn read_join(restart: Restart) {
    let mut server = RedisServer::start();
    let proxy = Proxy::start(server.port());
    let (m, other) = (
        partitioned_manager(&proxy).await,
        other_manager(&server).await,
    );
    if let Restart::FromOldSnapshot = restart {
        assert!(server.cmd(&["SAVE"]).is_ok());
    }
    let read = LockOptions::read().cohort_order();
    let held = m.acquire("g", &read).await.unwrap();
    let write = LockOptions::write();
    let write = restart_behind_a_partition(&mut server, &proxy, &other, "g", &write, restart).await;
    let others = write.fencing_token();
    let next = tokio::spawn({
        let (m, read) = (m.clone(), read.wait_timeout(Duration::from_secs(10)));
        async move { m.acquire("g", &read).await }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    if next.is_finished() {
        let got = next.await.unwrap();
        check_after(&got, others, &format!("{restart:?} read join"));
    } else {
        proxy.heal();
        write.release().await.unwrap();
        let got = tokio::time::timeout(Duration::from_secs(15), next)
            .await
            .expect("the read's wait ended")
            .unwrap();
        check_after(&got, others, &format!("{restart:?} read join"));
    }
    drop(held);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_read_join_after_a_hidden_empty_restart() {
    read_join(Restart::Empty).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_read_join_after_a_hidden_restart_from_an_old_snapshot() {
    read_join(Restart::FromOldSnapshot).await;
}
