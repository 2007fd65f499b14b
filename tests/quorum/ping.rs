//! A quorum's readiness: ready while a majority of its masters answer (a lock can be taken), not
//! ready when a majority is down or frozen, ready again once they are back.

use std::time::{Duration, Instant};

use tower_lock::LockManager;

use crate::support::masters::Masters;
use crate::support::GENEROUS;

async fn ready_within(m: &LockManager, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if m.ping().await.is_ok() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quorum_is_ready_while_a_majority_answers() {
    let mut masters = Masters::start(3);
    let m = masters.manager(Duration::from_secs(3)).await;
    m.ping().await.expect("ready");

    masters.servers[0].kill();
    m.ping().await.expect("ready: two of three answer");

    masters.servers[1].stop_process();
    let started = Instant::now();
    let err = m.ping().await.expect_err("one of three is no majority");
    let took = started.elapsed();
    masters.servers[1].continue_process();
    assert!(err.is_unavailable(), "{err:?}");
    assert!(err.to_string().contains("1 of 3"), "{err}");
    let killed = format!("127.0.0.1:{}", masters.servers[0].port());
    assert!(err.to_string().contains(&killed), "{err}");
    assert!(took < Duration::from_secs(4), "{took:?}");

    assert!(
        ready_within(&m, GENEROUS).await,
        "two of three answer again"
    );
    masters.servers[0].restart();
    masters.servers[2].kill();
    assert!(
        ready_within(&m, GENEROUS).await,
        "the restarted master counts again"
    );
}
