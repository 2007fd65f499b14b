//! The hand-over every backend test of a new way to reach Redis starts from (TLS, an ACL user):
//! two managers, one lock, and the release waking the other manager's waiter.

use std::time::Duration;

use tower_lock::{LockManager, LockOptions};

use crate::support::{eventually, GENEROUS};

/// A second manager's waiter gets the lock the first releases: woken through its inbox (the
/// lease is 30 s), with a larger fencing token.
pub async fn hand_over(first: &LockManager, second: &LockManager, opts: LockOptions) {
    let held = first.acquire("account:42", &opts).await.expect("acquire");
    let busy = second.try_acquire("account:42", &opts).await.expect("try");
    assert!(busy.is_none(), "held by the first manager");
    let waiter = {
        let second = second.clone();
        tokio::spawn(async move { second.acquire("account:42", &opts).await })
    };
    assert!(eventually(GENEROUS, || second.waiting() == 1).await);
    let token = held.fencing_token();
    held.release().await.expect("release");
    let next = tokio::time::timeout(Duration::from_secs(5), waiter)
        .await
        .expect("the waiter was woken")
        .expect("waiter task")
        .expect("acquire after release");
    assert!(next.fencing_token() > token);
    next.release().await.expect("release");
}
