//! TLS to Redis (feature `tls`) against TLS-only redis-servers whose CA the test made: locks and
//! wake-ups through a `redis::Client` that trusts that CA, `#insecure` URLs, refusals that name
//! the certificate, and a quorum of TLS masters.

use tower_lock::{LockError, LockManager, LockOptions};

use crate::hand_over::hand_over;
use crate::support::masters::NODE_TIMEOUT;
use crate::support::tls::TlsRedisServer;

/// A client for `server` that trusts only `ca_pem`.
fn trusting(server: &TlsRedisServer, ca_pem: Vec<u8>) -> redis::Client {
    let certs = redis::TlsCertificates {
        client_tls: None,
        root_cert: Some(ca_pem),
    };
    redis::Client::build_with_tls(server.url(), certs).expect("TLS client")
}

async fn trusting_manager(server: &TlsRedisServer) -> LockManager {
    LockManager::builder()
        .redis_client(trusting(server, server.ca_pem()))
        .build()
        .await
        .expect("manager over TLS")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_over_tls_excludes_and_its_release_wakes_the_waiter() {
    let server = TlsRedisServer::start();
    let (first, second) = (
        trusting_manager(&server).await,
        trusting_manager(&server).await,
    );
    for opts in [LockOptions::exclusive(), LockOptions::fair()] {
        hand_over(&first, &second, opts).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_insecure_url_accepts_a_certificate_nobody_trusts() {
    let server = TlsRedisServer::start();
    let manager = LockManager::redis(&server.insecure_url())
        .await
        .expect("#insecure skips verification");
    let guard = manager
        .acquire("k", &LockOptions::exclusive())
        .await
        .expect("acquire");
    assert!(guard.fencing_token() > 0);
    guard.release().await.expect("release");
}

/// Fails to build, saying that the certificate is why.
fn assert_refused_for_the_certificate(outcome: Result<LockManager, LockError>) {
    let err = outcome.expect_err("an untrusted certificate is refused");
    assert!(
        matches!(err, LockError::Unavailable { .. } | LockError::Config(_)),
        "{err:?}"
    );
    let text = err.to_string().to_lowercase();
    assert!(text.contains("certificate"), "the cause is named: {err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_certificate_nobody_trusts_is_refused_naming_it() {
    let (server, other) = (TlsRedisServer::start(), TlsRedisServer::start());
    // the system's roots do not know the test's CA
    assert_refused_for_the_certificate(LockManager::redis(&server.url()).await);
    // a client that trusts another CA
    let wrong_ca = trusting(&server, other.ca_pem());
    let outcome = LockManager::builder().redis_client(wrong_ca).build().await;
    assert_refused_for_the_certificate(outcome);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quorum_of_tls_masters_acquires() {
    let masters: Vec<TlsRedisServer> = std::thread::scope(|s| {
        let starting: Vec<_> = (0..3).map(|_| s.spawn(TlsRedisServer::start)).collect();
        starting.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let manager = || {
        LockManager::builder()
            .quorum(masters.iter().map(TlsRedisServer::insecure_url))
            .node_timeout(NODE_TIMEOUT)
            .build()
    };
    let (first, second) = (manager().await.unwrap(), manager().await.unwrap());
    let opts = LockOptions::exclusive();
    let held = first.acquire("account:42", &opts).await.expect("acquire");
    let busy = second.try_acquire("account:42", &opts).await.expect("try");
    assert!(busy.is_none(), "held by the first manager");
    let token = held.fencing_token();
    held.release().await.expect("release");
    let next = second.try_acquire("account:42", &opts).await.expect("try");
    let next = next.expect("free after the release");
    assert!(next.fencing_token() > token);
    next.release().await.expect("release");
}
