//! A tiny gRPC service written by hand (prost messages derived in Rust, no .proto, no protoc):
//! `bank.Bank/Deposit` adds to an account and answers the balance and the request's fencing token.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use http::uri::PathAndQuery;
use tonic::body::Body;
use tonic::server::NamedService;
use tonic::transport::{Channel, Endpoint};
use tonic::{Code, Status};
use tonic_prost::ProstCodec;
use tower::Service;
use tower_lock::LockInfo;

use super::Bank;

#[derive(Clone, PartialEq, prost::Message)]
pub struct DepositRequest {
    #[prost(uint64, tag = "1")]
    pub account: u64,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct DepositReply {
    #[prost(int64, tag = "1")]
    pub balance: i64,
    #[prost(uint64, tag = "2")]
    pub fencing_token: u64,
}

pub const DEPOSIT: &str = "/bank.Bank/Deposit";

/// The server side: what tonic's code generator would write for one unary method.
#[derive(Clone)]
pub struct BankServer {
    pub bank: Arc<Bank>,
    /// Make the handler wait this long (to let a short lease run out).
    pub delay: Option<Duration>,
}

impl NamedService for BankServer {
    const NAME: &'static str = "bank.Bank";
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

impl Service<http::Request<Body>> for BankServer {
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture<Result<Self::Response, Infallible>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<Body>) -> Self::Future {
        let server = self.clone();
        Box::pin(async move {
            if req.uri().path() != DEPOSIT {
                return Ok(Status::unimplemented("no such method").into_http());
            }
            let deposit = tower::service_fn(move |req: tonic::Request<DepositRequest>| {
                let server = server.clone();
                async move {
                    let token = req
                        .extensions()
                        .get::<LockInfo>()
                        .map(LockInfo::fencing_token);
                    if let Some(delay) = server.delay {
                        tokio::time::sleep(delay).await;
                    }
                    let balance = server.bank.deposit(req.get_ref().account, token).await;
                    Ok::<_, Status>(tonic::Response::new(DepositReply {
                        balance,
                        fencing_token: token.unwrap_or(0),
                    }))
                }
            });
            let mut grpc = tonic::server::Grpc::new(ProstCodec::default());
            Ok(grpc.unary(deposit, req).await)
        })
    }
}

/// The client side.
pub struct BankClient {
    grpc: tonic::client::Grpc<Channel>,
}

impl BankClient {
    pub async fn connect(addr: SocketAddr) -> BankClient {
        let channel = Endpoint::from_shared(format!("http://{addr}"))
            .expect("endpoint")
            .connect()
            .await
            .expect("connect");
        BankClient {
            grpc: tonic::client::Grpc::new(channel),
        }
    }

    /// Deposit into `account`; the account is also sent as the `x-account` metadata the lock layer
    /// reads (omitted when `None`); `timeout` becomes the request's `grpc-timeout`.
    pub async fn deposit(
        &mut self,
        account: Option<u64>,
        timeout: Option<Duration>,
    ) -> Result<DepositReply, Status> {
        let mut req = tonic::Request::new(DepositRequest {
            account: account.unwrap_or(0),
        });
        if let Some(account) = account {
            let value = account.to_string().parse().expect("metadata value");
            req.metadata_mut().insert("x-account", value);
        }
        if let Some(timeout) = timeout {
            req.set_timeout(timeout);
        }
        self.grpc
            .ready()
            .await
            .map_err(|err| Status::new(Code::Unknown, err.to_string()))?;
        let codec = ProstCodec::<DepositRequest, DepositReply>::default();
        self.grpc
            .unary(req, PathAndQuery::from_static(DEPOSIT), codec)
            .await
            .map(tonic::Response::into_inner)
    }
}
