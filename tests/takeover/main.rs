//! Takeover of dead holders (DESIGN.md, "Dead holders"): a holder whose process died is taken over
//! after the grace, not a lease later; a holder that lives never is, unless its `lost()` fired
//! first. The test binary runs itself as the child process, so it has a plain `main`.

#[path = "../support/mod.rs"]
mod support;

mod apart;
#[cfg(feature = "cluster")]
mod cluster;
mod cost;
#[cfg(feature = "axum")]
mod grant;
mod layer;
mod live;
mod quorum;
mod sentinel;

use std::io::{BufRead, BufReader};
use std::pin::Pin;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use support::RedisServer;
use tower_lock::{LockManager, LockOptions};

const CHILD_URL: &str = "TOWER_LOCK_CHILD_URL";
const CHILD_ROLE: &str = "TOWER_LOCK_CHILD_ROLE";
/// Long, so that a lock that passes on within a few seconds was taken over, not expired.
const LEASE: Duration = Duration::from_secs(30);
/// The default grace: a shorter one made live holders on a loaded 2-core machine count their
/// holds lost (a quorum master frozen beside four test processes).
const GRACE: Duration = tower_lock::DEFAULT_TAKEOVER_GRACE;
/// How long a takeover may take on a loaded 2-core machine: far below the lease.
const TAKEOVER_BOUND: Duration = Duration::from_secs(8);

type Test = fn() -> Pin<Box<dyn std::future::Future<Output = ()>>>;

fn main() {
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    if let (Ok(url), Ok(role)) = (std::env::var(CHILD_URL), std::env::var(CHILD_ROLE)) {
        runtime.block_on(child(&url, &role));
        return;
    }
    let mut tests: Vec<(&str, Test)> = vec![
        ("a_killed_exclusive_holder_is_taken_over", || {
            Box::pin(a_killed_holder_is_taken_over(LockOptions::exclusive()))
        }),
        ("a_killed_fair_holder_is_taken_over", || {
            Box::pin(a_killed_holder_is_taken_over(LockOptions::fair()))
        }),
        ("a_killed_holder_of_a_lock_hash_is_taken_over", || {
            Box::pin(a_killed_holder_of_a_lock_hash_is_taken_over())
        }),
        ("a_killed_write_holder_is_taken_over", || {
            Box::pin(killed_holder_taken_over("write", LockOptions::write()))
        }),
        ("a_killed_permit_holder_is_taken_over", || {
            Box::pin(killed_holder_taken_over(
                "permit",
                LockOptions::semaphore(1),
            ))
        }),
        ("a_stopped_holder_is_not_taken_over", || {
            Box::pin(a_stopped_holder_is_not_taken_over())
        }),
        ("a_holder_without_takeover_keeps_its_lease", || {
            Box::pin(a_holder_without_takeover_keeps_its_lease())
        }),
        (
            "an_inbox_reconnected_within_the_grace_keeps_the_hold",
            || Box::pin(live::an_inbox_reconnected_within_the_grace_keeps_the_hold()),
        ),
        (
            "a_holder_cut_from_its_inbox_is_lost_before_the_takeover",
            || {
                Box::pin(
                    live::a_holder_cut_from_its_inbox_is_lost_before_the_takeover(
                        LockOptions::exclusive(),
                    ),
                )
            },
        ),
        (
            "a_write_holder_cut_from_its_inbox_is_lost_before_the_takeover",
            || {
                Box::pin(
                    live::a_holder_cut_from_its_inbox_is_lost_before_the_takeover(
                        LockOptions::write(),
                    ),
                )
            },
        ),
        ("a_fresh_fair_grant_survives_an_inbox_reconnection", || {
            Box::pin(live::a_fresh_fair_grant_survives_an_inbox_reconnection())
        }),
        ("a_fixed_lease_hold_survives_an_inbox_reconnection", || {
            Box::pin(live::a_fixed_lease_hold_survives_an_inbox_reconnection())
        }),
        ("a_partitioned_holder_is_not_taken_over", || {
            Box::pin(live::a_partitioned_holder_is_not_taken_over())
        }),
        (
            "a_grant_read_after_its_takeover_deadline_is_not_taken",
            || Box::pin(grant::a_grant_read_after_its_takeover_deadline_is_not_taken()),
        ),
        (
            "a_live_holder_is_lost_before_a_takeover_through_a_failover",
            || Box::pin(sentinel::a_live_holder_is_lost_before_a_takeover_through_a_failover()),
        ),
        ("a_holder_killed_after_a_failover_is_taken_over", || {
            Box::pin(sentinel::a_holder_killed_after_a_failover_is_taken_over())
        }),
        ("short_holds_send_no_proof_pings", || {
            Box::pin(cost::short_holds_send_no_proof_pings())
        }),
        ("a_wait_sends_no_proof_pings", || {
            Box::pin(cost::a_wait_sends_no_proof_pings())
        }),
        ("a_killed_quorum_holder_is_taken_over", || {
            Box::pin(quorum::a_killed_quorum_holder_is_taken_over())
        }),
        ("a_quorum_inbox_killed_on_one_master_loses_nothing", || {
            Box::pin(quorum::a_quorum_inbox_killed_on_one_master_loses_nothing())
        }),
        (
            "a_quorum_holder_cut_on_a_majority_is_lost_before_the_takeover",
            || Box::pin(quorum::a_quorum_holder_cut_on_a_majority_is_lost_before_the_takeover()),
        ),
        ("a_frozen_quorum_master_loses_no_hold", || {
            Box::pin(quorum::a_frozen_quorum_master_loses_no_hold())
        }),
        ("a_quorum_holder_without_takeover_keeps_its_lease", || {
            Box::pin(quorum::a_quorum_holder_without_takeover_keeps_its_lease())
        }),
        ("quorum_probes_cost_one_call_per_manager_per_second", || {
            Box::pin(quorum::quorum_probes_cost_one_call_per_manager_per_second())
        }),
    ];
    #[cfg(feature = "axum")]
    tests.push((
        "a_request_through_the_layer_gets_a_killed_holders_lock",
        || Box::pin(layer::a_request_through_the_layer_gets_a_killed_holders_lock()),
    ));
    #[cfg(feature = "axum")]
    tests.push((
        "a_request_through_the_layer_gets_a_killed_quorum_holders_lock",
        || Box::pin(layer::a_request_through_the_layer_gets_a_killed_quorum_holders_lock()),
    ));
    #[cfg(feature = "cluster")]
    tests.extend(cluster::tests());
    if let Ok(one) = std::env::var(apart::ONE_TEST) {
        let (_, test) = (tests.iter().find(|(name, _)| *name == one)).expect("a test's name");
        runtime.block_on(test());
        return;
    }
    let only = std::env::args().nth(1).filter(|arg| !arg.starts_with('-'));
    let chosen: Vec<_> = (tests.iter())
        .filter(|(name, _)| only.as_deref().is_none_or(|only| name.contains(only)))
        .map(|(name, _)| *name)
        .collect();
    println!("\nrunning {} tests", chosen.len());
    let failed = apart::run_each(&chosen);
    if !failed.is_empty() {
        println!(
            "\ntest result: FAILED. {} failed: {failed:?}\n",
            failed.len()
        );
        std::process::exit(101);
    }
    println!("\ntest result: ok. {} passed; 0 failed\n", chosen.len());
}

/// A manager with a short takeover grace and a long lease.
async fn manager(url: &str) -> LockManager {
    LockManager::builder()
        .redis(url)
        .lease(LEASE)
        .takeover_grace(GRACE)
        .build()
        .await
        .expect("manager")
}

/// The child: hold the lock ("exclusive", "fair", or "no takeover": exclusive, by a manager with
/// takeover off; "quorum", "quorum no takeover": the same on a quorum whose masters' URLs `url`
/// joins by commas; "cluster": on the cluster of those nodes; a role ending in "account" holds
/// `accounts/7`), say so, and stay until
/// killed (or the parent goes).
async fn child(url: &str, role: &str) {
    if role == "wait and report" {
        return grant::wait_and_report(url).await;
    }
    let m = match role {
        "no takeover" => {
            let builder = LockManager::builder().redis(url).lease(LEASE);
            builder.no_takeover().build().await
        }
        "sentinel" => {
            Ok(sentinel::sentinel_manager(url.split(',').map(String::from).collect()).await)
        }
        #[cfg(feature = "cluster")]
        "cluster" | "cluster account" => Ok(cluster::cluster_manager(url.split(',')).await),
        "quorum" | "quorum account" | "quorum no takeover" => {
            let takeover = role != "quorum no takeover";
            Ok(quorum::quorum_manager(url.split(','), takeover).await)
        }
        _ => Ok(manager(url).await),
    };
    let m = m.expect("child manager");
    let opts = match role {
        "fair" | "fair reentered" => LockOptions::fair(),
        "write" => LockOptions::write(),
        "permit" => LockOptions::semaphore(1),
        _ => LockOptions::exclusive(),
    };
    let owner = m.owner();
    let key = if role.ends_with("account") {
        "accounts/7"
    } else {
        "held"
    };
    let guard = owner.acquire(key, &opts).await.expect("child acquire");
    // a fair re-entry makes the plain lock (SET NX) a hash, whose takeover retires its block
    let _again = match role {
        "fair reentered" => Some(owner.acquire("held", &opts).await.expect("re-enter")),
        _ => None,
    };
    println!("READY {}", guard.fencing_token());
    let _ = tokio::task::spawn_blocking(|| std::io::stdin().read_line(&mut String::new())).await;
    std::process::exit(0);
}

/// The child process in `role`, once it holds the lock, and the fencing token of its hold.
fn spawn_holder_with_token(server: &RedisServer, role: &str) -> (Child, u64) {
    spawn_child_with_token(&server.url(), role)
}

/// The child process in `role` on `url` (Sentinels' URLs joined by commas for "sentinel"), once
/// it holds the lock, and the fencing token of its hold.
fn spawn_child_with_token(url: &str, role: &str) -> (Child, u64) {
    let mut child = Command::new(std::env::current_exe().expect("test binary"))
        .env(CHILD_URL, url)
        .env(CHILD_ROLE, role)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn the child process");
    let mut line = String::new();
    let stdout = child.stdout.take().expect("child stdout");
    BufReader::new(stdout)
        .read_line(&mut line)
        .expect("read child");
    let token = line
        .trim()
        .strip_prefix("READY ")
        .expect("READY and a token");
    (child, token.parse().expect("a token"))
}

/// The child process in `role`, once it holds the lock.
fn spawn_holder(server: &RedisServer, role: &str) -> Child {
    spawn_holder_with_token(server, role).0
}

/// Kill `holder` (SIGKILL) and await `waiter`'s lock: taken over within [`TAKEOVER_BOUND`],
/// far below the lease, and not lost.
async fn taken_over_once_killed(
    mut holder: Child,
    waiter: tokio::task::JoinHandle<Result<tower_lock::LockGuard, tower_lock::LockError>>,
) -> tower_lock::LockGuard {
    holder.kill().expect("SIGKILL the holder");
    holder.wait().expect("reap");
    let killed = Instant::now();
    let guard = waiter.await.unwrap().expect("the waiter gets the lock");
    let took = killed.elapsed();
    assert!(took < TAKEOVER_BOUND, "taken over after {took:?}");
    assert!(!guard.is_lost());
    guard
}

/// A request of this process waiting for "held", until `wait` runs out.
fn wait_for_held(
    m: &LockManager,
    opts: LockOptions,
    wait: Duration,
) -> tokio::task::JoinHandle<Result<tower_lock::LockGuard, tower_lock::LockError>> {
    let m = m.clone();
    tokio::spawn(async move { m.acquire("held", &opts.wait_timeout(wait)).await })
}

/// A holder killed with SIGKILL while a request of another process waits: the request gets the
/// lock within a few seconds, though the holder's lease is 30 s.
async fn a_killed_holder_is_taken_over(opts: LockOptions) {
    let role = if opts == LockOptions::fair() {
        "fair"
    } else {
        "exclusive"
    };
    killed_holder_taken_over(role, opts).await;
}

/// As above, for a lock the holder made a hash by re-entering it.
async fn a_killed_holder_of_a_lock_hash_is_taken_over() {
    killed_holder_taken_over("fair reentered", LockOptions::fair()).await;
}

/// The child in `role` holds the lock and is killed while a request with `opts` waits: the
/// request gets it within [`TAKEOVER_BOUND`], under a token above every one of the dead
/// holder's block.
async fn killed_holder_taken_over(role: &str, opts: LockOptions) {
    let server = RedisServer::start();
    let (holder, token) = spawn_holder_with_token(&server, role);
    let m = manager(&server.url()).await;
    let waiter = wait_for_held(&m, opts, LEASE);
    // the waiter is in line (probes find the holder listening) before the holder dies
    tokio::time::sleep(GRACE * 3).await;
    assert!(!waiter.is_finished(), "the live holder was taken over");
    let guard = taken_over_once_killed(holder, waiter).await;
    assert!(
        guard.fencing_token() > token + 63,
        "token {token} handed out again"
    );
    guard.release().await.unwrap();
}

/// A holder frozen with SIGSTOP keeps its connections open: Redis sees it listening, so nobody
/// takes it over; its lease governs.
async fn a_stopped_holder_is_not_taken_over() {
    let server = RedisServer::start();
    let holder = spawn_holder(&server, "exclusive");
    let m = manager(&server.url()).await;
    let waiter = wait_for_held(&m, LockOptions::exclusive(), LEASE);
    kept_while_stopped(holder, waiter).await;
}

/// `holder` is frozen (SIGSTOP) for eight graces while `waiter` waits for its lock: nobody takes
/// it over; killed, it is taken over.
async fn kept_while_stopped(
    mut holder: Child,
    waiter: tokio::task::JoinHandle<Result<tower_lock::LockGuard, tower_lock::LockError>>,
) {
    let pid = holder.id().to_string();
    let signal = |sig: &str| {
        let status = Command::new("kill")
            .args([sig, &pid])
            .status()
            .expect("kill");
        assert!(status.success());
    };
    signal("-STOP");
    tokio::time::sleep(GRACE * 8).await;
    assert!(!waiter.is_finished(), "a frozen holder was taken over");
    signal("-CONT");
    holder.kill().expect("SIGKILL the holder");
    holder.wait().expect("reap");
    let guard = waiter.await.unwrap().expect("taken over once killed");
    guard.release().await.unwrap();
}

/// A holder whose manager has takeover off is never taken over, even dead: its lease governs.
async fn a_holder_without_takeover_keeps_its_lease() {
    let server = RedisServer::start();
    let mut holder = spawn_holder(&server, "no takeover");
    let m = manager(&server.url()).await;
    holder.kill().expect("SIGKILL the holder");
    holder.wait().expect("reap");
    let opts = LockOptions::exclusive().wait_timeout(GRACE * 8);
    let outcome = m.acquire("held", &opts).await;
    assert!(
        matches!(outcome, Err(tower_lock::LockError::Timeout { .. })),
        "a holder without takeover was taken over: {outcome:?}"
    );
}
