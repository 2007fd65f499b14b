//! Shared locks past a grant's bound: however many compatible requests wait when room opens (150
//! reads behind a write), every one is granted at once, not only the first ones a single script
//! looks at; and dead waiters of a killed process, however many, hold back no live one.

use std::time::Duration;

use tokio::time::Instant;
use tower_lock::{LockError, LockGuard, LockManager, LockOptions};

use super::dead_waiters::{keys_without_expiry, queue_dead, ExpiryWatch};
use super::support::{eventually, RedisServer};

/// Reads queued behind the write.
const READS: usize = 150;

/// A manager whose every request is its own in Redis (no read group, no cohort).
async fn manager(server: &RedisServer) -> LockManager {
    LockManager::builder()
        .redis(server.url())
        .local_handoffs(0)
        .build()
        .await
        .expect("manager")
}

fn queued(server: &RedisServer, key: &str) -> i64 {
    let queue = format!("{{tower-lock:{key}}}:qs");
    server.cmd(&["LLEN", &queue]).as_int().unwrap_or(0)
}

/// Spawn a request of `manager` for `key` with `opts` (a 5 s wait).
fn request(
    manager: &LockManager,
    key: &str,
    opts: &LockOptions,
) -> tokio::task::JoinHandle<Result<LockGuard, LockError>> {
    let (manager, key) = (manager.clone(), key.to_owned());
    let opts = opts.wait_timeout(Duration::from_secs(5));
    tokio::spawn(async move { manager.acquire(&key, &opts).await })
}

/// Every request's guard, each within 3 s of `since`: a request that fails names itself.
async fn all_granted(
    requests: Vec<tokio::task::JoinHandle<Result<LockGuard, LockError>>>,
    since: Instant,
) -> Vec<LockGuard> {
    let mut guards = Vec::new();
    let mut failed = Vec::new();
    for (n, request) in requests.into_iter().enumerate() {
        match request.await.expect("request task") {
            Ok(guard) => guards.push(guard),
            Err(err) => failed.push((n, err)),
        }
    }
    let waited = since.elapsed();
    assert!(
        failed.is_empty(),
        "{} of the requests were never granted, e.g. {:?}",
        failed.len(),
        failed.first()
    );
    assert!(
        waited < Duration::from_secs(3),
        "the last grant came {waited:?} after the room opened"
    );
    guards
}

/// The review's case: 150 reads of `readers` queue behind a write of `writer`; the write lets go.
/// Every read must be granted, and hold beside the others.
async fn reads_behind_a_write(server: &RedisServer, writer: &LockManager, readers: &[LockManager]) {
    let write = writer.acquire("k", &LockOptions::write()).await.unwrap();
    let reads: Vec<_> = (0..READS)
        .map(|n| request(&readers[n % readers.len()], "k", &LockOptions::read()))
        .collect();
    assert!(
        eventually(Duration::from_secs(5), || queued(server, "k")
            == READS as i64)
        .await
    );
    let released = Instant::now();
    write.release().await.unwrap();
    let guards = all_granted(reads, released).await;
    assert_eq!(guards.len(), READS);
    for guard in guards {
        guard.release().await.unwrap();
    }
    let left = keys_without_expiry(server);
    assert!(left.is_empty(), "keys left without an expiry: {left:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_read_queued_behind_a_write_is_granted() {
    let server = RedisServer::start();
    let (writer, reader) = (manager(&server).await, manager(&server).await);
    reads_behind_a_write(&server, &writer, &[reader]).await;
}

/// A variant: the reads wait in the writer's own process, whose release gets their grants back in
/// its answer instead of a message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_read_of_the_releasing_process_is_granted() {
    let server = RedisServer::start();
    let both = manager(&server).await;
    reads_behind_a_write(&server, &both, std::slice::from_ref(&both)).await;
}

/// A variant: the reads come from three processes, and a write of a fourth queues behind them.
/// Every read is granted; the write gets the lock once they let go.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_of_many_processes_are_granted_and_a_write_behind_them_follows() {
    let server = RedisServer::start();
    let writer = manager(&server).await;
    let readers = [
        manager(&server).await,
        manager(&server).await,
        manager(&server).await,
    ];
    let write = writer.acquire("k", &LockOptions::write()).await.unwrap();
    let reads: Vec<_> = (0..READS)
        .map(|n| request(&readers[n % 3], "k", &LockOptions::read()))
        .collect();
    assert!(
        eventually(Duration::from_secs(5), || queued(&server, "k")
            == READS as i64)
        .await
    );
    let next_write = request(&writer, "k", &LockOptions::write());
    assert!(
        eventually(Duration::from_secs(5), || queued(&server, "k")
            == READS as i64 + 1)
        .await
    );
    let released = Instant::now();
    write.release().await.unwrap();
    let guards = all_granted(reads, released).await;
    assert!(!next_write.is_finished(), "the write overlapped the reads");
    let released = Instant::now();
    for guard in guards {
        guard.release().await.unwrap();
    }
    let writes = all_granted(vec![next_write], released).await;
    for guard in writes {
        guard.release().await.unwrap();
    }
}

/// Lock `key` of `opts`'s family held by `holder` (`holds` holds), a live request with `opts`
/// queued behind it, and 20,000 waiters of kind `kind` of one process ahead of that request, which
/// was alive when the request came and was killed since (so that the request's own attempt left
/// them be); the holder lets one hold go. The live request gets the room within 3 s, and no key
/// is seen without an expiry.
async fn live_shared_waiter_behind_dead_ones(opts: LockOptions, holds: usize, kind: &str) {
    let server = RedisServer::start();
    let (holder, waiter) = (manager(&server).await, manager(&server).await);
    let holder_opts = match kind {
        "|n" => opts,
        _ => LockOptions::write(),
    };
    let mut held = Vec::new();
    for _ in 0..holds {
        held.push(holder.acquire("k", &holder_opts).await.unwrap());
    }
    let watch = ExpiryWatch::start(&server, "k");
    let live = request(&waiter, "k", &opts);
    assert!(eventually(Duration::from_secs(5), || queued(&server, "k") == 1).await);
    queue_dead(&server, "k", "qs", 20_000, 1, kind, "LPUSH");
    let released = Instant::now();
    held.pop().expect("a hold").release().await.unwrap();
    for guard in all_granted(vec![live], released).await {
        guard.release().await.unwrap();
    }
    let seen = watch.stop().await;
    assert!(seen.is_empty(), "keys seen without an expiry: {seen:?}");
}

/// A variant: a read waits behind 20,000 dead writes; the write holder lets go.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_behind_dead_writes_gets_the_free_lock() {
    live_shared_waiter_behind_dead_ones(LockOptions::read(), 1, "|w").await;
}

/// A variant: a semaphore of 5 permits, all held; a permit request waits behind 20,000 dead ones;
/// one permit is let go.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_permit_behind_dead_permit_waiters_gets_the_free_permit() {
    live_shared_waiter_behind_dead_ones(LockOptions::semaphore(5), 5, "|n").await;
}
