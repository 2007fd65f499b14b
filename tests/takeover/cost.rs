//! What takeover sends while nothing needs proving: a short hold's own call proves its inbox for
//! a grace, and a waiting manager's probes are its one extra command a second, so neither makes
//! the inbox PING more than a manager without takeover does.

use std::time::{Duration, Instant};

use tower_lock::{LockManager, LockOptions};

use super::support::RedisServer;
use super::{manager, wait_for_held, GRACE, LEASE};

/// How long each count runs: six thirds of the grace and more.
const WINDOW: Duration = Duration::from_secs(3);

/// Back-to-back holds of a few milliseconds for [`WINDOW`], with takeover on: no proof PINGs
/// (at most the idle keepalive, every 5 s). A window in which the machine stretched a hold past
/// a quarter of the grace proves nothing (such a hold is due a proof) and is measured again.
pub(super) async fn short_holds_send_no_proof_pings() {
    let server = RedisServer::start();
    let m = manager(&server.url()).await;
    for _ in 0..3 {
        server.cmd(&["CONFIG", "RESETSTAT"]);
        let (end, mut longest) = (Instant::now() + WINDOW, Duration::ZERO);
        while Instant::now() < end {
            let began = Instant::now();
            let guard = m.acquire("short", &LockOptions::exclusive()).await.unwrap();
            tokio::time::sleep(Duration::from_millis(5)).await;
            guard.release().await.unwrap();
            longest = longest.max(began.elapsed());
        }
        if longest > GRACE / 4 {
            eprintln!("a hold took {longest:?}: measuring again");
            continue;
        }
        let sent = server.command_calls("ping");
        assert!(sent <= 1, "{sent} PINGs for holds of 5 ms");
        return;
    }
    panic!("every window had a hold longer than a quarter of the grace");
}

/// A request waiting for [`WINDOW`] on a lock held by a manager without takeover: its manager
/// PINGs its inbox once a second, as it does without takeover, not every third of the grace.
pub(super) async fn a_wait_sends_no_proof_pings() {
    let server = RedisServer::start();
    let holder = LockManager::builder()
        .redis(server.url())
        .lease(LEASE)
        .no_takeover()
        .build()
        .await
        .expect("holder");
    let guard = holder
        .acquire("held", &LockOptions::exclusive())
        .await
        .unwrap();
    let m = manager(&server.url()).await;
    let waiter = wait_for_held(&m, LockOptions::exclusive(), LEASE);
    tokio::time::sleep(Duration::from_millis(200)).await;
    server.cmd(&["CONFIG", "RESETSTAT"]);
    tokio::time::sleep(WINDOW).await;
    let sent = server.command_calls("ping");
    // one a second, and an idle keepalive of the holder
    let bound = WINDOW.as_secs() + 2;
    assert!(
        sent <= bound,
        "{sent} PINGs in {WINDOW:?} of waiting (grace {GRACE:?})"
    );
    guard.release().await.unwrap();
    waiter.await.unwrap().unwrap().release().await.unwrap();
}
