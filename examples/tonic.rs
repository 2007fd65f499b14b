//! A tonic gRPC service under the lock layer: `Server::builder().layer(LockLayer::new(..))`.
//!
//! ```text
//! cargo run --example tonic                 # demo: 50 concurrent deposits to one account, then exit
//! cargo run --example tonic -- serve        # serve on 127.0.0.1:50051 until Ctrl-C or SIGTERM
//! REDIS_URL=redis://127.0.0.1:6379 cargo run --example tonic --features metrics -- serve
//! ```
//!
//! With `serve`, the server answers gRPC reflection, so `grpcurl` needs no `.proto` file:
//! `grpcurl -plaintext 127.0.0.1:50051 list`, then
//! `grpcurl -plaintext -H 'x-account: 1' -d '{"account": 1, "amount": 10}' 127.0.0.1:50051 bank.Bank/Deposit`;
//! `curl --http2-prior-knowledge 127.0.0.1:50051/metrics` shows the lock metrics (with feature
//! `metrics`), and `curl --http2-prior-knowledge 127.0.0.1:50051/ready` the readiness probe (503
//! while Redis is down). Ctrl-C or SIGTERM stops the server once its calls are done.
//!
//! Self-contained: no `.proto` file, no `build.rs`, no `protoc`. tonic 0.14 generates code with
//! `tonic-prost-build`, which needs `protoc`; instead the two messages derive `prost::Message` in
//! Rust, and the service and client are the few lines the generator would write, on tonic's own
//! `server::Grpc` and `client::Grpc` with `tonic_prost::ProstCodec`.
//!
//! The lock is the account the client names in the `x-account` metadata. Rejections arrive as gRPC
//! statuses: no account → `INVALID_ARGUMENT`, lock busy past the wait (or the call's deadline, sent
//! as `grpc-timeout`) → `UNAVAILABLE`.

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use http::uri::PathAndQuery;
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use tonic::body::Body;
use tonic::server::NamedService;
use tonic::service::Routes;
use tonic::transport::server::TcpIncoming;
use tonic::transport::{Channel, Endpoint, Server};
use tonic::{Code, Status};
use tonic_prost::ProstCodec;
use tower::Service;
use tower_lock::key::{self, KeyExtractor, RequestView};
use tower_lock::KeyError;
use tower_lock::{LockInfo, LockLayer, LockManager};

/// `message DepositRequest { uint64 account = 1; int64 amount = 2; }`
#[derive(Clone, PartialEq, prost::Message)]
pub struct DepositRequest {
    #[prost(uint64, tag = "1")]
    pub account: u64,
    #[prost(int64, tag = "2")]
    pub amount: i64,
}

/// `message DepositReply { int64 balance = 1; uint64 fencing_token = 2; }`
#[derive(Clone, PartialEq, prost::Message)]
pub struct DepositReply {
    #[prost(int64, tag = "1")]
    pub balance: i64,
    #[prost(uint64, tag = "2")]
    pub fencing_token: u64,
}

#[path = "tonic/descriptor.rs"]
mod descriptor;
#[path = "common/ready.rs"]
mod ready;
#[path = "common/signal.rs"]
mod signal;

const DEPOSIT: &str = "/bank.Bank/Deposit";

/// `service Bank { rpc Deposit(DepositRequest) returns (DepositReply); }`
#[derive(Clone, Default)]
struct Bank {
    balances: Arc<Mutex<HashMap<u64, i64>>>,
}

impl Bank {
    /// Read, await, write: safe only under the account's lock.
    async fn deposit(&self, req: tonic::Request<DepositRequest>) -> Result<DepositReply, Status> {
        let token = req
            .extensions()
            .get::<LockInfo>()
            .map(LockInfo::fencing_token)
            .ok_or_else(|| Status::internal("not running under the lock layer"))?;
        let DepositRequest { account, amount } = req.into_inner();
        let read = self.balance(account);
        tokio::time::sleep(Duration::from_millis(1)).await; // a database round trip
        let balance = read + amount;
        self.balances
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(account, balance);
        Ok(DepositReply {
            balance,
            fencing_token: token,
        })
    }

    fn balance(&self, account: u64) -> i64 {
        let balances = self.balances.lock().unwrap_or_else(|p| p.into_inner());
        balances.get(&account).copied().unwrap_or(0)
    }
}

impl NamedService for Bank {
    const NAME: &'static str = "bank.Bank";
}

impl Service<http::Request<Body>> for Bank {
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<Body>) -> Self::Future {
        let bank = self.clone();
        Box::pin(async move {
            if req.uri().path() != DEPOSIT {
                return Ok(Status::unimplemented(req.uri().path().to_owned()).into_http());
            }
            let method = tower::service_fn(move |req: tonic::Request<DepositRequest>| {
                let bank = bank.clone();
                async move { bank.deposit(req).await.map(tonic::Response::new) }
            });
            let mut grpc = tonic::server::Grpc::new(ProstCodec::default());
            Ok(grpc.unary(method, req).await)
        })
    }
}

/// The client the generator would write.
#[derive(Clone)]
struct BankClient {
    grpc: tonic::client::Grpc<Channel>,
}

impl BankClient {
    async fn deposit(&mut self, account: u64, amount: i64) -> Result<DepositReply, Status> {
        let mut req = tonic::Request::new(DepositRequest { account, amount });
        let value = account
            .to_string()
            .parse()
            .map_err(|_| Status::internal("metadata"))?;
        req.metadata_mut().insert("x-account", value);
        req.set_timeout(Duration::from_secs(10));
        self.grpc
            .ready()
            .await
            .map_err(|err| Status::new(Code::Unavailable, err.to_string()))?;
        let codec = ProstCodec::<DepositRequest, DepositReply>::default();
        let path = PathAndQuery::from_static(DEPOSIT);
        Ok(self.grpc.unary(req, path, codec).await?.into_inner())
    }
}

/// The lock of a bank call: the account named in its `x-account` metadata (`account:1`); calls
/// to other services (reflection), `/metrics` and `/ready` take none.
fn bank_calls() -> impl KeyExtractor {
    key::from_fn(
        |req: &dyn RequestView| -> Result<Option<String>, KeyError> {
            if !req.path().starts_with("/bank.Bank/") {
                return Ok(None);
            }
            let account = req.header_str("x-account");
            let account =
                account.ok_or_else(|| KeyError::Extract("no x-account metadata".into()))?;
            Ok(Some(format!("account:{account}")))
        },
    )
}

/// The bank, gRPC reflection, `/metrics` and the readiness probe `/ready` (over HTTP/1 or 2), as
/// one set of routes.
fn routes(
    exporter: PrometheusHandle,
    manager: LockManager,
) -> Result<Routes, Box<dyn std::error::Error>> {
    let reflection = tonic_reflection::server::Builder::configure()
        .register_file_descriptor_set(descriptor::bank())
        .build_v1()?;
    let metrics = axum::Router::new()
        .route(
            "/metrics",
            axum::routing::get(move || std::future::ready(exporter.render())),
        )
        .route("/ready", ready::ready(manager));
    let grpc = Routes::new(Bank::default()).add_service(reflection);
    Ok(Routes::from(grpc.into_axum_router().merge(metrics)))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // installed before the manager is built, so that every metric carries its help text
    let exporter = PrometheusBuilder::new().install_recorder()?;
    let manager = match std::env::var("REDIS_URL") {
        Ok(url) => LockManager::redis(&url).await?,
        Err(_) => LockManager::memory(),
    };
    let routes = routes(exporter, manager.clone())?;
    let locks = LockLayer::new(manager.clone(), bank_calls()).wait_timeout(Duration::from_secs(10));
    let serve_only = std::env::args().any(|arg| arg == "serve");
    let addr = match std::env::var("ADDR") {
        Ok(addr) => addr,
        Err(_) if serve_only => "127.0.0.1:50051".to_owned(),
        Err(_) => "127.0.0.1:0".to_owned(),
    };
    let incoming = TcpIncoming::bind(addr.parse()?)?;
    let addr = incoming.local_addr()?;
    let server = Server::builder()
        .accept_http1(true)
        .layer(locks)
        .add_routes(routes);
    if serve_only {
        println!("listening on {addr} (gRPC with reflection, and /metrics)");
        // Ctrl-C or SIGTERM stops the server once its calls are done; then free what this
        // replica holds
        server
            .serve_with_incoming_shutdown(incoming, signal::shutdown_signal())
            .await?;
        manager.shutdown().await?;
        println!("stopped");
        return Ok(());
    }
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(server.serve_with_incoming_shutdown(incoming, async {
        let _ = stopped.await;
    }));

    let channel = Endpoint::from_shared(format!("http://{addr}"))?
        .connect()
        .await?;
    let client = BankClient {
        grpc: tonic::client::Grpc::new(channel),
    };
    let calls = (0..50).map(|_| {
        let mut client = client.clone();
        tokio::spawn(async move { client.deposit(1, 10).await })
    });
    let mut last = DepositReply::default();
    for call in futures_util::future::join_all(calls).await {
        let reply = call??;
        if reply.fencing_token > last.fencing_token {
            last = reply;
        }
    }
    println!(
        "50 concurrent deposits of 10: balance {} (last fencing token {})",
        last.balance, last.fencing_token
    );
    // a graceful stop lets the calls in flight finish; then free what this replica still holds
    let _ = stop.send(());
    server.await??;
    manager.shutdown().await?;
    Ok(())
}
