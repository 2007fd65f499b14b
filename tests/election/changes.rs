//! Forced leader changes and dead leaders: terms strictly increase, two candidates never lead at
//! once, and a leader whose process died is replaced within the takeover time.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tower_lock::LockManager;

use crate::support::masters::Masters;
use crate::support::RedisServer;
use crate::{Backend, LEASE};

/// How many times an operator forces the leader out.
const CHANGES: usize = 20;

/// The lease of the candidates whose leadership is forced out: short, so that a deposed leader
/// learns it (at its next renewal, a third of it later) within a second or so.
const FORCED_LEASE: Duration = Duration::from_secs(3);

/// A replacement within this bound was a takeover, not the 30 s lease running out.
const TAKEOVER_BOUND: Duration = Duration::from_secs(8);

/// What the candidates saw: each term as it was elected, and each term as its `lost()` fired.
#[derive(Default)]
struct Record {
    elected: Vec<u64>,
    lost: Vec<u64>,
}

/// Three candidates campaign again and again; each leads until its leadership is lost, which an
/// operator forces [`CHANGES`] times (`force_release`, which fences the deposed leader out on
/// purpose: the next one is elected at once, and the deposed one's `lost()` fires within a
/// third of its lease). Every election's term is above the one before.
async fn forced_changes(backend: Backend) {
    let record = Arc::new(Mutex::new(Record::default()));
    let target = backend.target().expect("a server backend");
    let mut candidates = Vec::new();
    for label in ["a", "b", "c"] {
        let m = target.manager_with(label, FORCED_LEASE).await;
        candidates.push(tokio::spawn(campaign_forever(m, record.clone())));
    }
    let operator = target.manager_with("operator", FORCED_LEASE).await;
    let mut forced = Vec::new();
    for change in 0..CHANGES {
        // a leader elected since the last change
        let latest = || record.lock().unwrap().elected.last().copied();
        let led = wait_until(Duration::from_secs(20), || {
            latest() != forced.last().copied()
        })
        .await;
        assert!(led, "no new leader after {change} changes");
        forced.push(latest().expect("a leader"));
        let released = operator.force_release("scheduler").await.unwrap();
        assert!(released, "nobody led");
    }
    let told = || {
        forced
            .iter()
            .all(|t| record.lock().unwrap().lost.contains(t))
    };
    let bound = FORCED_LEASE / 3 + Duration::from_secs(2);
    assert!(
        wait_until(bound, told).await,
        "a deposed leader was not told"
    );
    let elected = record.lock().unwrap().elected.clone();
    assert!(elected.len() > CHANGES, "{} elections", elected.len());
    let increasing = elected.windows(2).all(|w| w[0] < w[1]);
    assert!(increasing, "terms out of order: {elected:?}");
    for candidate in candidates {
        candidate.abort();
    }
}

/// Campaign, lead until lost, and campaign again, recording each term.
async fn campaign_forever(m: LockManager, record: Arc<Mutex<Record>>) {
    loop {
        let leadership = m.campaign("scheduler").await.expect("campaign");
        record.lock().unwrap().elected.push(leadership.term());
        leadership.lost().await;
        record.lock().unwrap().lost.push(leadership.term());
    }
}

async fn wait_until(bound: Duration, mut done: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + bound;
    while !done() {
        if Instant::now() > deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    true
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_forced_changes_keep_terms_increasing_on_redis() {
    forced_changes(Backend::Redis(RedisServer::start())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_forced_changes_keep_terms_increasing_on_a_quorum() {
    forced_changes(Backend::Quorum(Masters::start(3))).await;
}

/// A leader whose process dies (its runtime dropped closes its connections, as a killed process's
/// would) is replaced by the waiting candidate within [`TAKEOVER_BOUND`], under a higher term.
async fn a_dead_leader_is_replaced(backend: Backend) {
    let target = backend.target().expect("a server backend");
    let (term_tx, term_rx) = std::sync::mpsc::channel();
    let leader = std::thread::spawn(move || {
        let runtime = tokio::runtime::Runtime::new().expect("runtime");
        runtime.block_on(async {
            let m = target.manager("doomed").await;
            let leadership = m.campaign("scheduler").await.expect("elected");
            term_tx.send(leadership.term()).unwrap();
            std::mem::forget(leadership);
        });
    });
    leader.join().expect("the leader's thread");
    let dead_term = term_rx.recv().unwrap();
    let successor = backend.manager("successor").await;
    let led = successor.leader("scheduler").await.unwrap();
    assert_eq!(
        led.and_then(|l| l.label).as_deref(),
        Some("doomed"),
        "the dead leader leads"
    );
    let started = Instant::now();
    let leadership = successor.campaign("scheduler").await.unwrap();
    let took = started.elapsed();
    assert!(
        took < TAKEOVER_BOUND,
        "replaced after {took:?} (lease {LEASE:?})"
    );
    assert!(leadership.term() > dead_term);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_leader_is_replaced_within_the_takeover_time_on_redis() {
    a_dead_leader_is_replaced(Backend::Redis(RedisServer::start())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_leader_is_replaced_within_the_takeover_time_on_a_quorum() {
    a_dead_leader_is_replaced(Backend::Quorum(Masters::start(3))).await;
}
