//! Candidates elected in arrival order; `leader` and `watch_leader` show who leads.

use std::time::{Duration, Instant};

use tower_lock::LockError;

use crate::support::masters::Masters;
use crate::support::{eventually, RedisServer, GENEROUS};
use crate::{Backend, LEASE};

/// Three candidates of three managers call in turn; each resignation elects the next caller, under
/// a higher term, and `leader` and a watch name each leader in turn.
async fn elected_in_order(backend: Backend) {
    let names = ["first", "second", "third"];
    let mut managers = Vec::new();
    for name in names {
        managers.push(backend.manager(name).await);
    }
    assert_eq!(managers[0].leader("scheduler").await.unwrap(), None);
    let mut watch = managers[0].watch_leader("scheduler", Duration::from_millis(20));
    assert_eq!(watch.changed().await.unwrap(), None);
    let mut leading = managers[0].campaign("scheduler").await.unwrap();
    let mut campaigns = Vec::new();
    for (i, m) in managers.iter().enumerate().skip(1) {
        let m = m.clone();
        campaigns.push(tokio::spawn(async move { m.campaign("scheduler").await }));
        let queued = || async {
            let state = managers[0].inspect("scheduler").await.unwrap();
            state.waiters.len() >= i || !backend.ordered()
        };
        let deadline = Instant::now() + GENEROUS;
        while !queued().await {
            assert!(Instant::now() < deadline, "candidate {i} never queued");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
    let mut terms = vec![leading.term()];
    let mut labels = Vec::new();
    while !campaigns.is_empty() {
        let leader = next_leader(&mut watch).await;
        let now = managers[0]
            .leader("scheduler")
            .await
            .unwrap()
            .expect("a leader");
        assert_eq!(leader.manager, now.manager);
        if backend.ordered() {
            assert_eq!(leader.term, Some(leading.term()), "the term observers see");
        }
        labels.push(leader.label);
        leading.resign().await.unwrap();
        // the next caller in line is elected at once (on a quorum, any caller)
        let first = futures_util::future::select_all(campaigns.iter_mut());
        let (elected, at, _) = tokio::time::timeout(GENEROUS, first)
            .await
            .expect("elected");
        assert!(
            at == 0 || !backend.ordered(),
            "caller {at} elected before caller 0"
        );
        campaigns.remove(at);
        leading = elected.unwrap().expect("elected");
        let last = *terms.last().unwrap();
        assert!(
            leading.term() > last,
            "term {} after {terms:?}",
            leading.term()
        );
        terms.push(leading.term());
    }
    labels.push(next_leader(&mut watch).await.label);
    if let Backend::Redis(_) = backend {
        // one manager per candidate here: the labels name them
        assert_eq!(
            labels,
            names.map(|n| Some(n.to_owned())),
            "out of arrival order"
        );
    }
    leading.resign().await.unwrap();
    let gone = || async { managers[0].leader("scheduler").await.unwrap().is_none() };
    assert!(gone().await, "a leader after the last resigned");
}

/// The next leader `watch` sees (a moment with nobody leading, between two, is skipped).
async fn next_leader(watch: &mut tower_lock::LeaderWatch) -> tower_lock::Leader {
    loop {
        if let Some(leader) = watch.changed().await.unwrap() {
            return leader;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn candidates_are_elected_in_arrival_order_on_memory() {
    elected_in_order(Backend::memory()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn candidates_are_elected_in_arrival_order_on_redis() {
    elected_in_order(Backend::Redis(RedisServer::start())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn candidates_take_turns_on_a_quorum() {
    elected_in_order(Backend::Quorum(Masters::start(3))).await;
}

/// A campaign waits while another leads, and a campaign given up (its future dropped) leaves no
/// candidate behind: the next resignation elects the one still waiting.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_campaign_given_up_leaves_nothing_behind() {
    let server = RedisServer::start();
    let backend = Backend::Redis(server);
    let (a, b, c) = (
        backend.manager("a").await,
        backend.manager("b").await,
        backend.manager("c").await,
    );
    let leading = a.campaign("jobs").await.unwrap();
    let given_up = tokio::time::timeout(Duration::from_millis(300), b.campaign("jobs")).await;
    assert!(given_up.is_err(), "elected while another led");
    let waiting = tokio::spawn(async move { c.campaign("jobs").await });
    assert!(eventually(GENEROUS, || !waiting.is_finished()).await);
    leading.resign().await.unwrap();
    let next = tokio::time::timeout(GENEROUS, waiting).await;
    let next = next.expect("elected at once").unwrap().unwrap();
    let leader = a.leader("jobs").await.unwrap().expect("c leads");
    assert_eq!(leader.label.as_deref(), Some("c"));
    assert!(leader.since.is_some_and(|since| since < LEASE));
    next.resign().await.unwrap();
    assert!(matches!(
        a.campaign("").await,
        Err(LockError::InvalidKey(_))
    ));
}
