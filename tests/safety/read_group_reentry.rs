//! A re-entry yields the same token: also into a read group, whose members hold under tokens of
//! their own. A member that re-enters gets its own token back, not the group's latest one.

use tower_lock::{LockManager, LockOptions};

use super::support;
use support::RedisServer;

async fn manager(server: &RedisServer) -> LockManager {
    LockManager::builder()
        .redis(server.url())
        .local_handoffs(8)
        .build()
        .await
        .expect("manager")
}

fn read() -> LockOptions {
    LockOptions::read().cohort_order()
}

/// The group's leader and a member each re-enter after others joined: each gets its own token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reentry_into_a_read_group_yields_the_members_own_token() {
    let server = RedisServer::start();
    let m = manager(&server).await;
    let (leader, member) = (m.owner(), m.owner());
    let led = leader.acquire("t", &read()).await.unwrap();
    let joined = member.acquire("t", &read()).await.unwrap();
    let others = [
        m.acquire("t", &read()).await.unwrap(),
        m.acquire("t", &read()).await.unwrap(),
    ];
    assert_eq!(joined.fencing_token(), led.fencing_token() + 1);
    assert_eq!(others[1].fencing_token(), led.fencing_token() + 3);
    let leader_again = leader.acquire("t", &read()).await.unwrap();
    let member_again = member.acquire("t", &read()).await.unwrap();
    assert_eq!(leader_again.fencing_token(), led.fencing_token());
    assert_eq!(member_again.fencing_token(), joined.fencing_token());
    // a re-entry with a fixed lease too
    let fixed = read().lease(std::time::Duration::from_secs(5));
    let member_fixed = member.acquire("t", &fixed).await.unwrap();
    assert_eq!(member_fixed.fencing_token(), joined.fencing_token());
    for guard in [member_fixed, member_again, leader_again, joined, led] {
        guard.release().await.unwrap();
    }
    for guard in others {
        guard.release().await.unwrap();
    }
}
