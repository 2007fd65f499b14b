//! Fair mode: a request cancelled while its attempt takes the lock is undone once: its undo
//! (by token) and its leaving the queue never both drop a hold, so the owner's re-entry made
//! meanwhile keeps the lock.

use std::time::Duration;

use tower_lock::{LockManager, LockOptions};

use super::support::RedisServer;
use super::watch::nobody_else_takes_it;

/// Redis pauses every client for 500 ms. Meanwhile an owner's waiting request sends its attempt
/// on the free lock, the same owner's try_acquire sends a re-entry, and the waiting request is
/// cancelled. When Redis resumes, the attempt takes the lock, the re-entry re-enters it (two
/// holds), and the cancelled attempt's late answer is undone: one hold goes, the re-entry's
/// stays. (Before, the take named the request's wait, and its leaving the queue dropped a second
/// hold: the lock was free while the re-entry's guard was not lost.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_take_is_undone_once() {
    let server = RedisServer::start();
    // cohorting off for `m`, so that its owner's requests meet in Redis, as requests with a
    // fixed lease do (with cohorting they meet in memory: `cohorts.rs`)
    let uncohorted = LockManager::builder().redis(server.url()).local_handoffs(0);
    let (m, rival) = (
        uncohorted.build().await.unwrap(),
        LockManager::redis(&server.url()).await.unwrap(),
    );
    let fair = LockOptions::fair();
    // open both managers' command connections before the pause
    drop(m.try_acquire("warm", &fair).await.unwrap());
    drop(rival.try_acquire("warm", &fair).await.unwrap());
    let owner = m.owner();
    assert!(server.cmd(&["CLIENT", "PAUSE", "500", "ALL"]).is_ok());
    let waiting = tokio::spawn({
        let owner = owner.clone();
        async move { owner.acquire("k", &fair).await.map(drop) }
    });
    tokio::time::sleep(Duration::from_millis(80)).await;
    let reentry = tokio::spawn({
        let owner = owner.clone();
        async move { owner.try_acquire("k", &fair).await }
    });
    tokio::time::sleep(Duration::from_millis(80)).await;
    waiting.abort();
    let guard = reentry.await.unwrap().unwrap().expect("the re-entry holds");
    // the cancelled request's undo and withdrawal run in the background: watch for a while
    let window = Duration::from_millis(500);
    nobody_else_takes_it(&rival, "k", &fair, &guard, window).await;
    guard.release().await.unwrap();
}
