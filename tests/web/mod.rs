//! Shared by the web tests (the `layer` and `actix` binaries): real axum servers on loopback, a real
//! HTTP/1.1 client, and a bank whose deposit handler does a non-atomic read-modify-write; actix-web
//! servers in [`actix`].
#![allow(dead_code)]

#[cfg(feature = "actix")]
pub mod actix;
pub mod conn;
pub mod grpc;
pub mod stacks;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::put;
use axum::{Extension, Router};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use tower_lock::key::{self, KeyExtractor};
use tower_lock::{LockInfo, LockLayer, LockManager, LockOptions};

/// Serve `router` on a free loopback port until the test ends.
pub async fn serve(router: Router) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind 127.0.0.1:0");
    let addr = listener.local_addr().expect("local addr");
    tokio::spawn(async move {
        axum::serve(listener, router).await.expect("serve");
    });
    addr
}

/// What a test reads from a response.
#[derive(Debug)]
pub struct Reply {
    pub status: StatusCode,
    pub headers: http::HeaderMap,
    pub body: String,
}

impl Reply {
    pub fn retry_after(&self) -> Option<&str> {
        self.headers
            .get(http::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
    }
}

/// A pooled HTTP/1.1 client (hyper-util's).
#[derive(Clone)]
pub struct HttpClient {
    client: Client<hyper_util::client::legacy::connect::HttpConnector, Full<Bytes>>,
}

impl Default for HttpClient {
    fn default() -> Self {
        HttpClient {
            client: Client::builder(TokioExecutor::new()).build_http(),
        }
    }
}

impl HttpClient {
    pub async fn send(&self, method: &str, addr: SocketAddr, path: &str) -> Reply {
        self.send_with(method, addr, path, &[]).await
    }

    pub async fn send_with(
        &self,
        method: &str,
        addr: SocketAddr,
        path: &str,
        headers: &[(&str, &str)],
    ) -> Reply {
        let mut req = http::Request::builder()
            .method(method)
            .uri(format!("http://{addr}{path}"));
        for (name, value) in headers {
            req = req.header(*name, *value);
        }
        let req = req.body(Full::new(Bytes::new())).expect("request");
        let response = self.client.request(req).await.expect("send request");
        let (parts, body) = response.into_parts();
        let body = body.collect().await.expect("read body").to_bytes();
        Reply {
            status: parts.status,
            headers: parts.headers,
            body: String::from_utf8_lossy(&body).into_owned(),
        }
    }

    /// Send and return the response head; the body is left to the caller.
    pub async fn head(
        &self,
        method: &str,
        addr: SocketAddr,
        path: &str,
    ) -> http::Response<hyper::body::Incoming> {
        let req = http::Request::builder()
            .method(method)
            .uri(format!("http://{addr}{path}"))
            .body(Full::new(Bytes::new()))
            .expect("request");
        self.client.request(req).await.expect("send request")
    }
}

/// Accounts whose deposits are a read, an await, and a write: without a lock, concurrent deposits
/// to one account lose updates.
#[derive(Default)]
pub struct Bank {
    balances: Mutex<HashMap<u64, i64>>,
    /// Deposit handlers running right now, per account, and the most seen at once.
    inside: Mutex<HashMap<u64, usize>>,
    pub max_inside: AtomicUsize,
    /// Fencing tokens in the order the writes happened, per account.
    tokens: Mutex<HashMap<u64, Vec<u64>>>,
}

impl Bank {
    pub fn balance(&self, id: u64) -> i64 {
        lock(&self.balances).get(&id).copied().unwrap_or(0)
    }

    pub fn tokens(&self, id: u64) -> Vec<u64> {
        lock(&self.tokens).get(&id).cloned().unwrap_or_default()
    }

    /// Deposit 1 into account `id`: read, give other tasks a chance to run, write.
    pub async fn deposit(&self, id: u64, token: Option<u64>) -> i64 {
        {
            let mut inside = lock(&self.inside);
            let n = inside.entry(id).or_insert(0);
            *n += 1;
            self.max_inside.fetch_max(*n, Ordering::SeqCst);
        }
        let read = self.balance(id);
        tokio::time::sleep(Duration::from_millis(1)).await;
        lock(&self.balances).insert(id, read + 1);
        if let Some(token) = token {
            lock(&self.tokens).entry(id).or_default().push(token);
        }
        *lock(&self.inside).entry(id).or_insert(1) -= 1;
        read + 1
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// `PUT /accounts/{id}`: deposit 1, answer the new balance.
pub fn bank_routes(bank: Arc<Bank>) -> Router {
    async fn deposit(
        State(bank): State<Arc<Bank>>,
        Path(id): Path<u64>,
        info: Option<Extension<LockInfo>>,
    ) -> String {
        let token = info.map(|Extension(info)| info.fencing_token());
        bank.deposit(id, token).await.to_string()
    }
    Router::new()
        .route("/accounts/{id}", put(deposit).get(|| async { "read" }))
        .with_state(bank)
}

/// The layer the bank tests use: one lock per account named in the path.
pub fn accounts(manager: &LockManager) -> LockLayer<impl KeyExtractor> {
    LockLayer::new(manager.clone(), key::pattern("/accounts/{id}"))
}

/// Exclusive locks that wait at most `wait`.
pub fn exclusive_for(wait: Duration) -> LockOptions {
    LockOptions::exclusive().wait_timeout(wait)
}
