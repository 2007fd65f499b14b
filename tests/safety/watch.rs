//! What several scenarios check after the fact: that no other manager can take a lock while a
//! guard that was not lost holds it.

use std::time::Duration;

use tower_lock::{LockGuard, LockManager, LockOptions};

/// For `window`, `rival` tries to take `key` every 20 ms: it must never get it while `guard`
/// is not lost; and `guard` is still not lost at the end.
pub async fn nobody_else_takes_it(
    rival: &LockManager,
    key: &str,
    opts: &LockOptions,
    guard: &LockGuard,
    window: Duration,
) {
    let until = tokio::time::Instant::now() + window;
    while tokio::time::Instant::now() < until {
        let stolen = rival.try_acquire(key, opts).await.unwrap();
        assert!(
            stolen.is_none() || guard.is_lost(),
            "{key}: another manager took the lock while the guard was not lost"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(!guard.is_lost(), "{key}: the guard was lost");
}
