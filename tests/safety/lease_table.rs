//! A guard whose lease was lost, released after its owner re-entered the lock under the same
//! token, leaves the new guard's lease alone: it is still renewed.

use std::time::Duration;

use tower_lock::{LockManager, LockOptions};

use super::support::{eventually, RedisServer};

/// The owner holds the lock with a fixed 20 s lease and re-enters it on the 1.5 s watchdog lease
/// (G1). Its Redis user loses the right to run scripts until G1's lease is lost (the lock stays,
/// under the fixed lease). Then the owner re-enters again (G2, the same token) and drops G1. G2
/// must still be renewed: three leases later it is not lost. (Before, G1's release took the count
/// of G2's fresh lease entry, renewals stopped, and G2 was lost after 1.5 s.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_guards_release_leaves_a_later_reentry_renewed() {
    let server = RedisServer::start();
    let acl = ["ACL", "SETUSER", "u", "on", ">pw", "~*", "&*", "+@all"];
    assert!(server.cmd(&acl).is_ok());
    let lease = Duration::from_millis(1500);
    let m = LockManager::builder()
        .redis(format!("redis://u:pw@127.0.0.1:{}", server.port()))
        .lease(lease)
        .command_timeout(Duration::from_millis(300))
        .build()
        .await
        .unwrap();
    let owner = m.owner();
    let fixed = LockOptions::exclusive().lease(Duration::from_secs(20));
    let outer = owner.acquire("k", &fixed).await.unwrap();
    let g1 = owner.acquire("k", &LockOptions::exclusive()).await.unwrap();

    let revoke = ["ACL", "SETUSER", "u", "-evalsha", "-eval"];
    assert!(server.cmd(&revoke).is_ok());
    tokio::time::timeout(lease * 3, g1.lost())
        .await
        .expect("renewals that fail lose the lease");
    assert!(
        eventually(lease * 3, || m.held() == 0).await,
        "the watchdog let go of the lost lease"
    );
    assert!(server.cmd(&acl).is_ok());

    let g2 = owner.acquire("k", &LockOptions::exclusive()).await.unwrap();
    assert_eq!(g2.fencing_token(), outer.fencing_token(), "a re-entry");
    drop(g1);
    tokio::time::sleep(lease * 3).await;
    assert!(!g2.is_lost(), "the re-entry's lease stopped being renewed");
    g2.release().await.unwrap();
    outer.release().await.unwrap();
}
