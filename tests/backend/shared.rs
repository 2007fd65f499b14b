//! Shared locks, on memory and on a real redis-server: read/write locks (any number of reads or
//! one write, FIFO across both, reads queued together granted together) and semaphores (at most n
//! holds, FIFO); every hold with its own token and lease; families never mixed on one lock.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tower_lock::{LockError, LockGuard, LockManager, LockOptions};

use crate::on_both_backends;
use crate::support::fixture::Fixture;
use crate::support::{eventually, GENEROUS};

on_both_backends!(
    reads_overlap_and_a_write_overlaps_nothing,
    a_read_that_arrives_after_a_queued_write_waits_behind_it,
    reads_queued_together_are_granted_together,
    a_semaphore_admits_n_holds_in_order_of_arrival,
    every_hold_has_its_own_increasing_token,
    a_hold_reenters_and_a_read_never_becomes_a_write,
    exclusive_and_write_holds_are_one_exclusion,
    a_permit_held_on_a_fixed_lease_returns_when_it_runs_out,
    a_cancelled_write_lets_the_reads_behind_it_in,
    a_writer_gets_in_under_a_stream_of_readers,
    a_write_grant_racing_with_cancel_is_passed_on,
);

/// Queued requests across `managers` (in memory, one manager stands for all).
fn queued(fx: &Fixture, managers: &[LockManager]) -> usize {
    if fx.is_memory() {
        managers[0].queued()
    } else {
        managers.iter().map(LockManager::queued).sum()
    }
}

/// Start `acquire(key, opts)` on `m` in a task; the guard comes back through the handle.
fn spawn_acquire(
    m: &LockManager,
    key: &'static str,
    opts: LockOptions,
) -> tokio::task::JoinHandle<LockGuard> {
    let m = m.clone();
    tokio::spawn(async move { m.acquire(key, &opts).await.expect("acquire") })
}

/// Counts who is inside the critical section: readers and writers.
#[derive(Default)]
struct Inside {
    readers: AtomicUsize,
    writers: AtomicUsize,
    most_readers: AtomicUsize,
    broken: AtomicUsize,
}

impl Inside {
    fn enter(&self, write: bool) {
        let (mine, theirs) = if write {
            (&self.writers, &self.readers)
        } else {
            (&self.readers, &self.writers)
        };
        let now = mine.fetch_add(1, Ordering::SeqCst) + 1;
        if theirs.load(Ordering::SeqCst) > 0 || (write && now > 1) {
            self.broken.fetch_add(1, Ordering::SeqCst);
        }
        if !write {
            self.most_readers.fetch_max(now, Ordering::SeqCst);
        }
    }

    fn leave(&self, write: bool) {
        let mine = if write { &self.writers } else { &self.readers };
        mine.fetch_sub(1, Ordering::SeqCst);
    }
}

async fn reads_overlap_and_a_write_overlaps_nothing(fx: Fixture) {
    let managers = [fx.manager().await, fx.manager().await];
    let inside = Arc::new(Inside::default());
    let mut tasks = Vec::new();
    for i in 0..12 {
        let (m, inside) = (managers[i % 2].clone(), inside.clone());
        tasks.push(tokio::spawn(async move {
            for round in 0..15 {
                let write = (i + round) % 5 == 0;
                let opts = if write {
                    LockOptions::write()
                } else {
                    LockOptions::read()
                };
                let guard = m.acquire("rw", &opts).await.expect("acquire");
                inside.enter(write);
                tokio::time::sleep(Duration::from_millis(2)).await;
                inside.leave(write);
                guard.release().await.expect("release");
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    assert_eq!(
        inside.broken.load(Ordering::SeqCst),
        0,
        "a write overlapped"
    );
    assert!(
        inside.most_readers.load(Ordering::SeqCst) > 1,
        "reads never overlapped"
    );
}

async fn a_read_that_arrives_after_a_queued_write_waits_behind_it(fx: Fixture) {
    let managers = [fx.manager().await, fx.manager().await];
    let read = managers[0]
        .acquire("q", &LockOptions::read())
        .await
        .unwrap();
    let write = spawn_acquire(&managers[1], "q", LockOptions::write());
    assert!(eventually(GENEROUS, || queued(&fx, &managers) == 1).await);
    // a read of either manager now queues behind the write, though only reads hold the lock
    for m in &managers {
        assert!(m
            .try_acquire("q", &LockOptions::read())
            .await
            .unwrap()
            .is_none());
    }
    let late_read = spawn_acquire(&managers[0], "q", LockOptions::read());
    assert!(eventually(GENEROUS, || queued(&fx, &managers) == 2).await);
    read.release().await.unwrap();
    let write = write.await.unwrap();
    assert!(!late_read.is_finished(), "the read passed the write");
    write.release().await.unwrap();
    late_read.await.unwrap().release().await.unwrap();
}

async fn reads_queued_together_are_granted_together(fx: Fixture) {
    let managers = [fx.manager().await, fx.manager().await];
    let write = managers[0]
        .acquire("g", &LockOptions::write())
        .await
        .unwrap();
    let mut reads = Vec::new();
    for i in 0..6 {
        reads.push(spawn_acquire(&managers[i % 2], "g", LockOptions::read()));
        assert!(eventually(GENEROUS, || queued(&fx, &managers) == i + 1).await);
    }
    let next_write = spawn_acquire(&managers[1], "g", LockOptions::write());
    assert!(eventually(GENEROUS, || queued(&fx, &managers) == 7).await);
    // a cluster publishes on shards
    let messages = || -> u64 {
        let nodes = fx.data_nodes();
        let calls = nodes
            .iter()
            .map(|n| n.command_calls("publish") + n.command_calls("spublish"));
        calls.sum()
    };
    let published = (!fx.is_memory()).then(messages);
    write.release().await.unwrap();
    let mut guards = Vec::new();
    for read in reads {
        guards.push(read.await.unwrap());
    }
    if let Some(before) = published {
        // the releasing manager's own three grants come back in the release's answer
        assert_eq!(
            messages() - before,
            1,
            "one message for the other manager's three grants"
        );
    }
    assert!(
        !next_write.is_finished(),
        "the write came in with the reads"
    );
    let mut tokens: Vec<u64> = guards.iter().map(LockGuard::fencing_token).collect();
    tokens.dedup();
    assert_eq!(tokens.len(), 6, "every read has its own token: {tokens:?}");
    for guard in guards {
        guard.release().await.unwrap();
    }
    next_write.await.unwrap().release().await.unwrap();
}

/// A write granted as its waiter is cancelled goes on to the next waiter, whether the grant went
/// out by message (the waiter's manager is not the releaser's) or came back in the release's
/// answer (it is), and nothing stays queued.
async fn a_write_grant_racing_with_cancel_is_passed_on(fx: Fixture) {
    let (a, b) = (fx.manager().await, fx.manager().await);
    crate::fair::grants_race_with_cancels(&fx, [&a, &b], "wrace", LockOptions::write(), 40).await;
    assert_eq!(queued(&fx, &[a, b]), 0);
}

async fn a_semaphore_admits_n_holds_in_order_of_arrival(fx: Fixture) {
    let managers = [fx.manager().await, fx.manager().await];
    let opts = LockOptions::semaphore(2);
    let inside = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let order = Arc::new(Mutex::new(Vec::new()));
    let first = managers[0].acquire("sem", &opts).await.unwrap();
    let second = managers[1].acquire("sem", &opts).await.unwrap();
    assert!(managers[0]
        .try_acquire("sem", &opts)
        .await
        .unwrap()
        .is_none());
    let mut tasks = Vec::new();
    for i in 0..8 {
        let (m, inside, most, order) = (
            managers[i % 2].clone(),
            inside.clone(),
            most.clone(),
            order.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let guard = m.acquire("sem", &opts).await.expect("permit");
            // permits freed at once are granted at once: their tokens tell the order
            order.lock().unwrap().push((guard.fencing_token(), i));
            let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
            most.fetch_max(now, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(5)).await;
            inside.fetch_sub(1, Ordering::SeqCst);
            guard.release().await.unwrap();
        }));
        assert!(eventually(GENEROUS, || queued(&fx, &managers) == i + 1).await);
    }
    first.release().await.unwrap();
    second.release().await.unwrap();
    for task in tasks {
        task.await.unwrap();
    }
    let mut order = order.lock().unwrap().clone();
    order.sort();
    let order: Vec<usize> = order.into_iter().map(|(_, i)| i).collect();
    assert_eq!(order, (0..8).collect::<Vec<_>>(), "not FIFO");
    assert!(most.load(Ordering::SeqCst) <= 2, "more than 2 permits held");
    assert_eq!(most.load(Ordering::SeqCst), 2, "permits never overlapped");
}

async fn every_hold_has_its_own_increasing_token(fx: Fixture) {
    let m = fx.manager().await;
    let mut last = 0;
    for opts in [
        LockOptions::read(),
        LockOptions::read(),
        LockOptions::write(),
        LockOptions::read(),
    ] {
        let guard = m.acquire("t", &opts).await.unwrap();
        assert!(
            guard.fencing_token() > last,
            "{} after {last}",
            guard.fencing_token()
        );
        last = guard.fencing_token();
        guard.release().await.unwrap();
    }
    // two reads held at once: each its own token, in order of acquisition
    let a = m.acquire("t", &LockOptions::read()).await.unwrap();
    let b = m.acquire("t", &LockOptions::read()).await.unwrap();
    assert!(a.fencing_token() > last && b.fencing_token() > a.fencing_token());
    a.release().await.unwrap();
    b.release().await.unwrap();
}

async fn a_hold_reenters_and_a_read_never_becomes_a_write(fx: Fixture) {
    let m = fx.manager().await;
    let other = fx.manager().await;
    let owner = m.owner();
    let write = owner.acquire("re", &LockOptions::write()).await.unwrap();
    // a write holder may read: the read re-enters its write hold
    let read = owner.acquire("re", &LockOptions::read()).await.unwrap();
    assert_eq!(read.fencing_token(), write.fencing_token());
    write.release().await.unwrap();
    assert!(other
        .try_acquire("re", &LockOptions::read())
        .await
        .unwrap()
        .is_none());
    read.release().await.unwrap();

    let read = owner.acquire("re", &LockOptions::read()).await.unwrap();
    let err = owner
        .try_acquire("re", &LockOptions::write())
        .await
        .unwrap_err();
    assert!(
        matches!(&err, LockError::Unsupported { key, what } if key == "re" && what.contains("read hold")),
        "{err}"
    );
    read.release().await.unwrap();
    let write = other
        .try_acquire("re", &LockOptions::write())
        .await
        .unwrap();
    assert!(write.is_some(), "the refused upgrade left a hold behind");
}

/// Exclusive and write holds are one exclusion: a request of either family finds the other's
/// hold busy (it would wait for it as the holder's family), never an error. Semaphores mix with
/// neither, nor with one of another size: those are refused.
async fn exclusive_and_write_holds_are_one_exclusion(fx: Fixture) {
    let m = fx.manager().await;
    let refused = |result: Result<Option<LockGuard>, LockError>, held: &str| match result {
        Err(LockError::Unsupported { key, what }) => {
            assert_eq!(key, "mix");
            assert!(what.contains(held), "{what}");
        }
        other => panic!("not refused: {other:?}"),
    };
    let busy = |result: Result<Option<LockGuard>, LockError>, what: &str| match result {
        Ok(None) => {}
        other => panic!("{what}: not busy: {other:?}"),
    };
    let exclusive = m.acquire("mix", &LockOptions::exclusive()).await.unwrap();
    busy(
        m.try_acquire("mix", &LockOptions::read()).await,
        "read on exclusive",
    );
    busy(
        m.try_acquire("mix", &LockOptions::write()).await,
        "write on exclusive",
    );
    refused(
        m.try_acquire("mix", &LockOptions::semaphore(2)).await,
        "exclusive",
    );
    exclusive.release().await.unwrap();
    let read = m.acquire("mix", &LockOptions::read()).await.unwrap();
    busy(
        m.try_acquire("mix", &LockOptions::exclusive()).await,
        "exclusive on read",
    );
    busy(
        m.try_acquire("mix", &LockOptions::fair()).await,
        "fair on read",
    );
    refused(
        m.try_acquire("mix", &LockOptions::semaphore(2)).await,
        "read/write",
    );
    read.release().await.unwrap();
    let permit = m.acquire("mix", &LockOptions::semaphore(2)).await.unwrap();
    refused(
        m.try_acquire("mix", &LockOptions::semaphore(3)).await,
        "semaphore",
    );
    refused(
        m.try_acquire("mix", &LockOptions::write()).await,
        "semaphore",
    );
    permit.release().await.unwrap();
    let fair = m.acquire("mix", &LockOptions::fair()).await.unwrap();
    busy(
        m.try_acquire("mix", &LockOptions::write()).await,
        "write on fair",
    );
    fair.release().await.unwrap();
    let write = m.try_acquire("mix", &LockOptions::write()).await.unwrap();
    assert!(write.is_some(), "a free lock refused a write");
    busy(
        m.try_acquire("mix", &LockOptions::exclusive()).await,
        "exclusive on write",
    );
}

async fn a_permit_held_on_a_fixed_lease_returns_when_it_runs_out(fx: Fixture) {
    let m = fx.manager().await;
    let other = fx.manager().await;
    let lease = Duration::from_millis(400);
    let opts = LockOptions::semaphore(1);
    let held = m.acquire("lease", &opts.lease(lease)).await.unwrap();
    let started = Instant::now();
    // its holder forgets it, as a process that died would
    std::mem::forget(held);
    let next = other
        .acquire("lease", &opts.wait_timeout(Duration::from_secs(10)))
        .await
        .unwrap();
    let waited = started.elapsed();
    assert!(waited >= lease - Duration::from_millis(50), "{waited:?}");
    assert!(waited < lease + GENEROUS, "{waited:?}");
    next.release().await.unwrap();
}

async fn a_cancelled_write_lets_the_reads_behind_it_in(fx: Fixture) {
    let managers = [fx.manager().await, fx.manager().await];
    let read = managers[0]
        .acquire("c", &LockOptions::read())
        .await
        .unwrap();
    let write = spawn_acquire(&managers[1], "c", LockOptions::write());
    assert!(eventually(GENEROUS, || queued(&fx, &managers) == 1).await);
    let late_read = spawn_acquire(&managers[0], "c", LockOptions::read());
    assert!(eventually(GENEROUS, || queued(&fx, &managers) == 2).await);
    write.abort();
    let late_read = tokio::time::timeout(GENEROUS, late_read)
        .await
        .expect("the read behind the cancelled write waits on")
        .unwrap();
    read.release().await.unwrap();
    late_read.release().await.unwrap();
}

async fn a_writer_gets_in_under_a_stream_of_readers(fx: Fixture) {
    let managers = [fx.manager().await, fx.manager().await];
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut readers = Vec::new();
    for i in 0..8 {
        let (m, stop) = (managers[i % 2].clone(), stop.clone());
        readers.push(tokio::spawn(async move {
            while !stop.load(Ordering::SeqCst) {
                let guard = m.acquire("s", &LockOptions::read()).await.expect("read");
                tokio::time::sleep(Duration::from_millis(10)).await;
                guard.release().await.expect("release");
            }
        }));
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    let writer = managers[1]
        .acquire("s", &LockOptions::write().wait_timeout(GENEROUS))
        .await;
    stop.store(true, Ordering::SeqCst);
    writer.expect("the writer starved").release().await.unwrap();
    for reader in readers {
        reader.await.unwrap();
    }
}

/// A read hold whose holder entry is deleted behind its guard is lost at the next renewal, while
/// the other reads of the lock are renewed and stay held.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_hold_deleted_behind_its_guard_is_lost_and_the_others_stay() {
    let server = crate::support::RedisServer::start();
    let m = LockManager::builder()
        .redis(server.url())
        .lease(Duration::from_millis(600))
        .build()
        .await
        .unwrap();
    let (kept, doomed) = (
        m.acquire("lost", &LockOptions::read()).await.unwrap(),
        m.acquire("lost", &LockOptions::read()).await.unwrap(),
    );
    let fields = server.cmd(&["ZRANGE", "{tower-lock:lost}:s", "0", "-1"]);
    let holders = fields.as_strings().unwrap();
    assert_eq!(holders.len(), 2);
    // the second hold's token tells which holder entry is the doomed guard's
    let doomed_owner = holders
        .iter()
        .find(|owner| {
            let token = server.cmd(&["HGET", "{tower-lock:lost}", &format!("#t:{owner}")]);
            token.as_int() == Some(doomed.fencing_token() as i64)
        })
        .unwrap();
    server.cmd(&["ZREM", "{tower-lock:lost}:s", doomed_owner]);
    tokio::time::timeout(GENEROUS, doomed.lost())
        .await
        .expect("the deleted hold is lost");
    tokio::time::sleep(Duration::from_millis(1200)).await;
    assert!(
        !kept.is_lost(),
        "the other read was renewed past two leases"
    );
    kept.release().await.unwrap();
    assert!(matches!(
        doomed.release().await,
        Err(LockError::NotHeld { .. })
    ));
}
