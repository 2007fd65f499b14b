//! Exclusive and write holds are one exclusion for users: exclusive, fair, write and read requests
//! on one key, from two managers at once, all get the lock in turn — no error, no overlap of an
//! excluding hold with any other, reads overlapping only reads. A background job taking the key
//! with the direct API's default (exclusive) and a layer taking reads and writes of it exclude
//! each other.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tower_lock::{LockManager, LockOptions};

use super::support;
use support::fixture::Fixture;

const ROUNDS: usize = 12;
const WAIT: Duration = Duration::from_secs(30);

/// The holds in progress: excluding ones and reads.
#[derive(Default)]
struct Inside {
    excluding: AtomicUsize,
    reads: AtomicUsize,
}

async fn contend(m: LockManager, opts: LockOptions, inside: Arc<Inside>) -> Result<(), String> {
    let read = opts.mode_value() == tower_lock::Mode::Read;
    for _ in 0..ROUNDS {
        let opts = opts.wait_timeout(WAIT);
        let guard = m
            .acquire("accounts/42", &opts)
            .await
            .map_err(|e| format!("{:?}: {e}", opts.mode_value()))?;
        let (mine, other) = match read {
            true => (&inside.reads, &inside.excluding),
            false => (&inside.excluding, &inside.reads),
        };
        let before = mine.fetch_add(1, Ordering::SeqCst);
        if other.load(Ordering::SeqCst) > 0 || (!read && before > 0) {
            return Err(format!("{:?} overlapped another hold", opts.mode_value()));
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
        mine.fetch_sub(1, Ordering::SeqCst);
        guard.release().await.map_err(|e| e.to_string())?;
    }
    Ok(())
}

async fn every_excluding_mode_takes_its_turn(fx: Fixture) {
    let managers = [fx.manager().await, fx.manager().await];
    let inside = Arc::new(Inside::default());
    let modes = [
        LockOptions::exclusive(),
        LockOptions::fair(),
        LockOptions::write(),
        LockOptions::read(),
        LockOptions::read(),
    ];
    let mut tasks = Vec::new();
    for m in &managers {
        for opts in &modes {
            let (m, opts, inside) = (m.clone(), *opts, inside.clone());
            tasks.push(tokio::spawn(contend(m, opts, inside)));
        }
    }
    for task in tasks {
        if let Err(problem) = task.await.unwrap() {
            panic!("{problem}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_excluding_mode_takes_its_turn_in_memory() {
    every_excluding_mode_takes_its_turn(Fixture::memory()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_excluding_mode_takes_its_turn_on_redis() {
    every_excluding_mode_takes_its_turn(Fixture::redis()).await;
}

/// A job holds the key exclusively: a write and a read of another replica wait for it and get
/// it once it is released; then a write holds it, and the job waits for that.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_and_write_requests_wait_for_each_other() {
    let fx = Fixture::redis();
    let (job, web) = (fx.manager().await, fx.manager().await);
    let held = job
        .acquire("accounts/7", &LockOptions::exclusive())
        .await
        .unwrap();
    let waiting = |opts: LockOptions| {
        let web = web.clone();
        // each releases at once: the two may be granted in either order
        tokio::spawn(async move {
            let guard = web.acquire("accounts/7", &opts.wait_timeout(WAIT)).await?;
            let token = guard.fencing_token();
            guard.release().await.map(|()| token)
        })
    };
    let (write, read) = (waiting(LockOptions::write()), waiting(LockOptions::read()));
    assert!(support::eventually(Duration::from_secs(5), || web.waiting() == 2).await);
    assert!(!write.is_finished() && !read.is_finished());
    let token = held.fencing_token();
    held.release().await.unwrap();
    for turn in [write, read] {
        let taken = turn
            .await
            .unwrap()
            .expect("the lock after the job's release");
        assert!(taken > token);
    }
    let write = web
        .acquire("accounts/7", &LockOptions::write())
        .await
        .unwrap();
    let opts = LockOptions::exclusive().wait_timeout(Duration::from_millis(300));
    let err = job.acquire("accounts/7", &opts).await.unwrap_err();
    assert!(
        matches!(err, tower_lock::LockError::Timeout { .. }),
        "{err:?}"
    );
    let next = tokio::spawn({
        let job = job.clone();
        async move {
            job.acquire("accounts/7", &LockOptions::exclusive().wait_timeout(WAIT))
                .await
        }
    });
    assert!(support::eventually(Duration::from_secs(5), || job.waiting() == 1).await);
    let token = write.fencing_token();
    write.release().await.unwrap();
    let taken = next.await.unwrap().expect("the job's lock after the write");
    assert!(taken.fencing_token() > token);
}
