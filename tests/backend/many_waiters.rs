//! Many waiters on one inbox: one pub/sub connection per manager however many wait, and no
//! polling; with takeover, one probe a second besides.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tower_lock::{LockGuard, LockManager, LockOptions};

use crate::support;
use crate::support::RedisServer;

/// 1,000 exclusive requests of one manager wait for 100 held locks: each waiting in Redis (lock
/// cohorting off: 1,000 attempts), or one per lock while the others wait for their turn in memory
/// (cohorting on: 100 attempts). Either way one pub/sub connection and no polling.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_waiters_share_one_connection_and_do_not_poll() {
    for (handoffs, attempts) in [(0, 1000), (8, 100)] {
        a_thousand_waiters(handoffs, attempts, Takeover::Off).await;
    }
}

/// As above with takeover on (the default): the waiting manager's one extra command is its probe
/// of the 100 holders, once a second; the holder, whose holds are old, PINGs its inbox every
/// third of the grace.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_waiters_with_takeover_send_one_probe_a_second() {
    a_thousand_waiters(8, 100, Takeover::Default).await;
}

/// Whether the managers take dead holders over.
#[derive(Clone, Copy, PartialEq)]
enum Takeover {
    Off,
    Default,
}

fn builder(server: &RedisServer, takeover: Takeover) -> tower_lock::LockManagerBuilder {
    let builder = LockManager::builder().redis(server.url());
    match takeover {
        Takeover::Off => builder.no_takeover(),
        Takeover::Default => builder,
    }
}

async fn a_thousand_waiters(handoffs: u32, attempts: u64, takeover: Takeover) {
    let server = RedisServer::start();
    let holder = builder(&server, takeover).lease(Duration::from_secs(30));
    let holder = holder.build().await.expect("holder");
    let m = builder(&server, takeover)
        .local_handoffs(handoffs)
        .build()
        .await
        .expect("manager");
    let mut held = Vec::new();
    for k in 0..100 {
        held.push(
            holder
                .acquire(&format!("key:{k}"), &LockOptions::exclusive())
                .await
                .unwrap(),
        );
    }
    let acquired = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for i in 0..1000 {
        let (m, acquired) = (m.clone(), acquired.clone());
        tasks.push(tokio::spawn(async move {
            let opts = LockOptions::exclusive().wait_timeout(Duration::from_secs(60));
            let g = m
                .acquire(&format!("key:{}", i % 100), &opts)
                .await
                .expect("acquire");
            acquired.fetch_add(1, Ordering::SeqCst);
            drop(g);
        }));
    }
    // every waiter in Redis made its one attempt, then went quiet. The holder took the 100 free
    // locks on the plain path (`SET NX`); a cohort's leader tries that first too, then the script.
    assert!(
        support::eventually(Duration::from_secs(30), || {
            server.command_calls("evalsha") >= attempts
        })
        .await
    );
    assert!(support::eventually(Duration::from_secs(5), || m.waiting() == 1000).await);
    if takeover == Takeover::Default {
        return probes_and_pings(&server, held, tasks).await;
    }
    assert_eq!(
        server.command_calls("evalsha"),
        attempts,
        "handoffs {handoffs}"
    );
    let plain_tries = if handoffs > 0 { attempts } else { 0 };
    assert_eq!(
        server.command_calls("set"),
        100 + plain_tries,
        "handoffs {handoffs}"
    );
    // both managers together: one pub/sub connection each, whatever the number of waiters
    assert_eq!(server.pubsub_clients(), 2);
    let before = server.total_commands();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let during = server.total_commands() - before;
    assert!(during <= 2, "{during} commands while 1,000 requests waited");
    drop(held);
    for t in tasks {
        t.await.unwrap();
    }
    assert_eq!(acquired.load(Ordering::SeqCst), 1000);
}

/// While the waiters of `tasks` wait for the locks `held`: 3 s of what the client sends, counted
/// by command: one probe `EVALSHA` a second (100 locks: one batch), PINGs (the holder's proofs,
/// four a second, and the waiting manager's check, one), nothing else.
async fn probes_and_pings(
    server: &RedisServer,
    held: Vec<LockGuard>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
) {
    let (evalsha, ping, set) = (
        server.command_calls("evalsha"),
        server.command_calls("ping"),
        server.command_calls("set"),
    );
    tokio::time::sleep(Duration::from_secs(3)).await;
    let probes = server.command_calls("evalsha") - evalsha;
    let pings = server.command_calls("ping") - ping;
    assert!((2..=4).contains(&probes), "{probes} probes in 3 s");
    assert!(pings <= 17, "{pings} PINGs in 3 s");
    assert_eq!(server.command_calls("set"), set, "plain-path retries");
    drop(held);
    for t in tasks {
        t.await.unwrap();
    }
}
