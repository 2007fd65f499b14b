//! The lock layer under tonic (`Server::builder().layer(..)`), through a real gRPC server and client
//! on loopback: rejections arrive as gRPC statuses, and `grpc-timeout` caps the wait.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tonic::transport::server::TcpIncoming;
use tonic::transport::Server;
use tonic::Code;
use tower_lock::key::{self, KeyExtractor};
use tower_lock::{LockLayer, LockManager, LockOptions, OnLeaseLost};

use crate::web::grpc::{BankClient, BankServer};
use crate::web::Bank;

/// The account named by the `x-account` metadata is the lock; requests without it are refused.
fn by_account(manager: &LockManager) -> LockLayer<impl KeyExtractor> {
    LockLayer::new(
        manager.clone(),
        key::header("x-account").required().prefix("accounts/"),
    )
}

async fn serve<K: KeyExtractor>(layer: LockLayer<K>, server: BankServer) -> SocketAddr {
    let incoming = TcpIncoming::bind("127.0.0.1:0".parse().expect("addr")).expect("bind");
    let addr = incoming.local_addr().expect("local addr");
    tokio::spawn(async move {
        Server::builder()
            .layer(layer)
            .add_service(server)
            .serve_with_incoming(incoming)
            .await
            .expect("serve");
    });
    addr
}

fn bank_server(bank: &Arc<Bank>) -> BankServer {
    BankServer {
        bank: bank.clone(),
        delay: None,
    }
}

#[tokio::test]
async fn locked_calls_succeed_with_increasing_fencing_tokens() {
    let manager = LockManager::memory();
    let bank = Arc::new(Bank::default());
    let addr = serve(by_account(&manager), bank_server(&bank)).await;
    let mut client = BankClient::connect(addr).await;

    let first = client.deposit(Some(1), None).await.expect("first deposit");
    let second = client.deposit(Some(1), None).await.expect("second deposit");
    assert_eq!((first.balance, second.balance), (1, 2));
    assert!(0 < first.fencing_token && first.fencing_token < second.fencing_token);
}

#[tokio::test]
async fn rejections_map_to_grpc_statuses() {
    let manager = LockManager::memory();
    let bank = Arc::new(Bank::default());
    let waiting = serve(
        by_account(&manager).wait_timeout(Duration::from_millis(100)),
        bank_server(&bank),
    )
    .await;
    let trying = serve(by_account(&manager).no_wait(), bank_server(&bank)).await;
    let mut waiting = BankClient::connect(waiting).await;
    let mut trying = BankClient::connect(trying).await;

    let missing = waiting.deposit(None, None).await.expect_err("no account");
    assert_eq!(missing.code(), Code::InvalidArgument, "{missing:?}");

    let _held = manager
        .acquire("accounts/7", &LockOptions::exclusive())
        .await
        .expect("hold");
    let timed_out = waiting.deposit(Some(7), None).await.expect_err("busy");
    assert_eq!(timed_out.code(), Code::Unavailable, "{timed_out:?}");
    assert!(timed_out.message().contains("accounts/7"), "{timed_out:?}");
    let busy = trying.deposit(Some(7), None).await.expect_err("busy");
    assert_eq!(busy.code(), Code::Aborted, "{busy:?}");
    assert_eq!(bank.balance(7), 0);
}

/// The tonic client enforces its deadline too (it reports `CANCELLED`), so this checks that nothing
/// outlives the deadline on either side; `plain_service.rs` checks the server's own `UNAVAILABLE`.
#[tokio::test]
async fn grpc_deadline_ends_the_wait_on_both_sides() {
    let manager = LockManager::memory();
    let bank = Arc::new(Bank::default());
    let layer = by_account(&manager).wait_timeout(Duration::from_secs(60));
    let addr = serve(layer, bank_server(&bank)).await;
    let mut client = BankClient::connect(addr).await;

    let held = manager
        .acquire("accounts/3", &LockOptions::exclusive())
        .await
        .expect("hold");
    let started = Instant::now();
    let status = client
        .deposit(Some(3), Some(Duration::from_millis(200)))
        .await
        .expect_err("the lock stays busy");
    assert!(
        matches!(
            status.code(),
            Code::Unavailable | Code::Cancelled | Code::DeadlineExceeded
        ),
        "{status:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "not the 60 s wait"
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while manager.waiting() != 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(manager.waiting(), 0, "the server-side waiter is gone");
    drop(held);
    let reply = client.deposit(Some(3), None).await.expect("free again");
    assert_eq!(reply.balance, 1, "the timed-out call never ran");
}

#[tokio::test]
async fn lost_lease_aborts_the_call() {
    let manager = LockManager::memory();
    let bank = Arc::new(Bank::default());
    let layer = by_account(&manager)
        .lease(Duration::from_millis(100))
        .on_lease_lost(OnLeaseLost::Abort);
    let slow = BankServer {
        bank: bank.clone(),
        delay: Some(Duration::from_secs(30)),
    };
    let addr = serve(layer, slow).await;
    let mut client = BankClient::connect(addr).await;

    let started = Instant::now();
    let status = client.deposit(Some(4), None).await.expect_err("aborted");
    assert_eq!(status.code(), Code::Aborted, "{status:?}");
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(
        bank.balance(4),
        0,
        "the handler was stopped before it wrote"
    );
}
