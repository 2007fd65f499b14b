//! `LockManager::ping`, the readiness probe: Ok while the server answers, `Unavailable` within the
//! command timeout when it is killed or frozen, Ok again once it is back; on a cluster, every
//! master counts; the memory backend is always ready.

use std::time::{Duration, Instant};

use tower_lock::{LockError, LockManager};

use crate::support::{RedisServer, GENEROUS};

/// Generous: the probe must end within the command timeout; this only checks that it does not
/// hang.
const PROMPTLY: Duration = Duration::from_secs(3);

async fn manager(server: &RedisServer) -> LockManager {
    LockManager::builder()
        .redis(server.url())
        .command_timeout(Duration::from_millis(500))
        .build()
        .await
        .expect("manager")
}

/// The probe's answer, and how long it took.
async fn timed_ping(m: &LockManager) -> (Result<(), LockError>, Duration) {
    let started = Instant::now();
    let answer = m.ping().await;
    (answer, started.elapsed())
}

/// Whether the probe answers Ok within `within` (asked every 50 ms).
pub async fn ready_within(m: &LockManager, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if m.ping().await.is_ok() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

#[tokio::test]
async fn the_memory_backend_is_always_ready_until_shut_down() {
    let m = LockManager::memory();
    m.ping().await.expect("ready");
    m.shutdown().await.unwrap();
    assert!(matches!(m.ping().await, Err(LockError::Closed)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_server_is_not_ready_until_it_is_back() {
    let mut server = RedisServer::start();
    let m = manager(&server).await;
    m.ping().await.expect("ready while the server answers");
    server.kill();
    let (answer, took) = timed_ping(&m).await;
    let err = answer.expect_err("not ready without a server");
    assert!(err.is_unavailable(), "{err:?}");
    let place = format!("127.0.0.1:{}", server.port());
    assert!(err.to_string().contains(&place), "{err}");
    assert!(took < PROMPTLY, "{took:?}");
    server.restart();
    assert!(
        ready_within(&m, GENEROUS).await,
        "ready once the server is back"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_server_fails_the_probe_within_the_command_timeout() {
    let server = RedisServer::start();
    let m = manager(&server).await;
    m.ping().await.expect("ready while the server answers");
    server.stop_process();
    let (answer, took) = timed_ping(&m).await;
    server.continue_process();
    let err = answer.expect_err("not ready while frozen");
    assert!(err.is_unavailable(), "{err:?}");
    assert!(took < PROMPTLY, "{took:?}");
    assert!(
        ready_within(&m, GENEROUS).await,
        "ready once the server resumes"
    );
}

/// The inbox counts: with its connection killed (commands still fine) the manager is not ready
/// until the inbox has reconnected.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_inbox_counts_for_readiness() {
    let server = RedisServer::start();
    let m = manager(&server).await;
    m.ping().await.expect("ready");
    // on one connection of the test's own: no new connection is taken, the inbox's is killed
    let mut admin = std::net::TcpStream::connect(("127.0.0.1", server.port())).unwrap();
    inline(
        &mut admin,
        "CONFIG SET maxclients 1\r\nCLIENT KILL TYPE pubsub\r\n",
        2,
    );
    let mut refused = None;
    for _ in 0..40 {
        if let Err(err) = m.ping().await {
            refused = Some(err);
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let err = refused.expect("not ready while the inbox is down");
    assert!(err.to_string().contains("inbox"), "{err}");
    inline(&mut admin, "CONFIG SET maxclients 10000\r\n", 1);
    assert!(
        ready_within(&m, GENEROUS).await,
        "ready once the inbox is back"
    );
}

/// Send `commands` (inline) on `conn` and read their `answers` lines.
fn inline(conn: &mut std::net::TcpStream, commands: &str, answers: usize) {
    use std::io::{BufRead, Write};
    conn.write_all(commands.as_bytes()).unwrap();
    let mut reader = std::io::BufReader::new(conn.try_clone().unwrap());
    for _ in 0..answers {
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        assert!(!line.starts_with('-'), "{commands}: {line}");
    }
}

#[cfg(feature = "cluster")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_is_ready_only_when_every_master_answers() {
    let cluster = crate::support::cluster::Cluster::start();
    let m = LockManager::builder()
        .cluster(cluster.urls())
        .command_timeout(Duration::from_millis(500))
        .build()
        .await
        .expect("cluster manager");
    m.ping().await.expect("ready");
    let frozen = cluster.masters()[1];
    frozen.stop_process();
    let (answer, took) = timed_ping(&m).await;
    frozen.continue_process();
    let err = answer.expect_err("not ready with a master frozen");
    assert!(err.is_unavailable(), "{err:?}");
    assert!(took < PROMPTLY, "{took:?}");
    assert!(
        ready_within(&m, GENEROUS).await,
        "ready once the master resumes"
    );
}
