//! The other ways to reach the locks: `--sentinel` and `rediss://` (feature `tls`), each showing
//! a lock a manager of this process holds there.

use tower_lock::{LockManager, LockOptions};

use crate::run::tower_lock_ok;
use crate::support::sentinel::{SentinelService, SERVICE};
use crate::support::tls::TlsRedisServer;

/// `show KEY --json` through `target` finds `manager` holding KEY.
async fn shows_the_holder(target: Vec<String>, manager: &LockManager) {
    let guard = manager
        .acquire("accounts/9", &LockOptions::exclusive())
        .await
        .expect("hold");
    let mut args = target;
    args.extend(["show", "accounts/9", "--json"].map(str::to_owned));
    let out = tower_lock_ok(&args).await;
    let state: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(state["holders"][0]["manager"], manager.id(), "{state:#}");
    guard.release().await.expect("release");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sentinel_finds_the_master() {
    let service = SentinelService::start();
    let urls = service.sentinel_urls();
    let manager = LockManager::builder()
        .sentinel(urls.clone(), SERVICE)
        .build()
        .await
        .expect("manager");
    let mut target = vec!["--sentinel".to_owned(), SERVICE.to_owned()];
    for url in urls {
        target.extend(["--redis".to_owned(), url]);
    }
    shows_the_holder(target, &manager).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rediss_urls_speak_tls() {
    let server = TlsRedisServer::start();
    let url = server.insecure_url();
    let manager = LockManager::redis(&url).await.expect("manager");
    shows_the_holder(vec!["--redis".to_owned(), url], &manager).await;
}
