//! An outage is one WARN line however many connections notice it and however often they try to
//! reconnect, and one INFO line when the backend answers again: on one server with no request
//! running (only the inbox notices), with requests failing meanwhile, and on a quorum.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tower_lock::{LockManager, LockOptions};

use super::support::logs::{self, Fields};
use super::support::masters::Masters;
use super::support::{RedisServer, GENEROUS};

/// Keeps every event at INFO or above as `LEVEL field=value ...`.
struct Recorder(Arc<Mutex<Vec<String>>>);

impl tracing::Subscriber for Recorder {
    fn enabled(&self, metadata: &tracing::Metadata<'_>) -> bool {
        *metadata.level() <= tracing::Level::INFO
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        let mut line = format!("{} ", event.metadata().level());
        event.record(&mut Fields(&mut line));
        self.0.lock().unwrap().push(line);
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

struct Lines(Arc<Mutex<Vec<String>>>);

impl Lines {
    fn count(&self, level: &str, text: &str) -> usize {
        let lines = self.0.lock().unwrap();
        let prefix = format!("{level} ");
        (lines.iter())
            .filter(|l| l.starts_with(&prefix) && l.contains(text))
            .count()
    }

    fn warnings(&self) -> usize {
        self.count("WARN", "")
    }

    fn all(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }
}

fn record() -> (logs::ThreadDefault, Lines) {
    let lines = Arc::new(Mutex::new(Vec::new()));
    (
        logs::set_thread_default(Recorder(lines.clone())),
        Lines(lines),
    )
}

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

/// An idle manager (only its inbox notices) whose server is down for 4 s: one WARN line, however
/// many reconnect attempts, and one INFO line once it is back. (Before: one WARN per attempt.)
#[tokio::test]
async fn a_restart_seen_by_the_inbox_alone_is_one_warning() {
    let (_default, lines) = record();
    let mut server = RedisServer::start();
    let m = LockManager::builder()
        .redis(server.url())
        .build()
        .await
        .unwrap();
    server.kill();
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_eq!(lines.warnings(), 1, "{:#?}", lines.all());
    server.restart();
    assert!(ready_within(&m, GENEROUS).await);
    assert_eq!(
        lines.count("INFO", "answers again"),
        1,
        "{:#?}",
        lines.all()
    );
    assert_eq!(lines.warnings(), 1, "{:#?}", lines.all());
}

/// Requests fail while the inbox reconnects: still one WARN line for the outage, and one INFO
/// line when both are back; the next outage is logged again.
#[tokio::test]
async fn requests_and_the_inbox_failing_together_are_one_warning() {
    let (_default, lines) = record();
    let mut server = RedisServer::start();
    let m = LockManager::builder()
        .redis(server.url())
        .command_timeout(Duration::from_secs(1))
        .build()
        .await
        .unwrap();
    let fail_for = |m: LockManager, long: Duration| async move {
        let until = Instant::now() + long;
        while Instant::now() < until {
            let outcome = m.try_acquire("k", &LockOptions::exclusive()).await;
            assert!(outcome.is_err(), "{outcome:?}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    };
    server.kill();
    fail_for(m.clone(), Duration::from_secs(3)).await;
    assert_eq!(lines.warnings(), 1, "{:#?}", lines.all());
    server.restart();
    assert!(ready_within(&m, GENEROUS).await);
    // released before the server goes: a release left to the background could fail with it
    let taken = m.try_acquire("k", &LockOptions::exclusive()).await.unwrap();
    taken.expect("the lock is free").release().await.unwrap();
    assert_eq!(
        lines.count("INFO", "answers again"),
        1,
        "{:#?}",
        lines.all()
    );

    server.kill();
    fail_for(m.clone(), Duration::from_secs(1)).await;
    assert_eq!(lines.warnings(), 2, "{:#?}", lines.all());
}

/// A quorum master down for 3 s: one WARN line (naming it), one INFO line once it is back.
#[tokio::test]
async fn a_quorum_master_down_is_one_warning() {
    let (_default, lines) = record();
    let mut masters = Masters::start(3);
    let m = masters.manager(Duration::from_secs(3)).await;
    masters.servers[0].kill();
    for _ in 0..10 {
        // the quorum still takes locks
        drop(m.acquire("k", &LockOptions::exclusive()).await.unwrap());
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    assert_eq!(lines.warnings(), 1, "{:#?}", lines.all());
    let port = format!("127.0.0.1:{}", masters.servers[0].port());
    assert_eq!(lines.count("WARN", &port), 1, "{:#?}", lines.all());
    masters.servers[0].restart();
    let back = Instant::now() + GENEROUS;
    while lines.count("INFO", "answers again") == 0 && Instant::now() < back {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        lines.count("INFO", "answers again"),
        1,
        "{:#?}",
        lines.all()
    );
    assert_eq!(lines.warnings(), 1, "{:#?}", lines.all());
}

/// A held lock whose renewals fail every round through a 2 s outage: still one WARN line for the
/// outage (each lease lost is a warning of its own, naming its lock), one INFO line at its end.
#[tokio::test]
async fn renewals_failing_every_round_are_one_warning() {
    let (_default, lines) = record();
    let mut server = RedisServer::start();
    let m = LockManager::builder()
        .redis(server.url())
        .lease(Duration::from_millis(600))
        .command_timeout(Duration::from_millis(300))
        .build()
        .await
        .unwrap();
    let held = m.acquire("held", &LockOptions::exclusive()).await.unwrap();
    server.kill();
    // a renewal round every 200 ms
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(held.is_lost());
    let outage_warnings = lines.warnings() - lines.count("WARN", "lease lost");
    assert_eq!(outage_warnings, 1, "{:#?}", lines.all());
    server.restart();
    assert!(ready_within(&m, GENEROUS).await);
    let mut back = false;
    for _ in 0..100 {
        back = lines.count("INFO", "answers again") == 1;
        if back {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(back, "{:#?}", lines.all());
}
