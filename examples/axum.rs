//! An axum service whose deposits to one account run one at a time, in every replica.
//!
//! ```text
//! cargo run --example axum --features axum            # demo: 100 concurrent deposits to one account
//! cargo run --example axum --features axum -- serve   # serve on 127.0.0.1:3000 until Ctrl-C or SIGTERM
//! REDIS_URL=redis://127.0.0.1:6379 cargo run --example axum --features axum,metrics -- serve
//! ```
//!
//! With `serve`, try `curl -X PUT localhost:3000/accounts/1/deposit/10`,
//! `curl localhost:3000/accounts/1`, `curl localhost:3000/metrics` (the lock metrics, with
//! feature `metrics`) and `curl localhost:3000/ready` (the readiness probe: 503 while Redis is
//! down). Ctrl-C or SIGTERM (`docker stop`, Kubernetes) stops the server once its requests are
//! done, then the manager releases whatever it still holds. Run two servers on one Redis (`ADDR=127.0.0.1:3001`) and the
//! deposits of both still never overlap for one account (the store here is per process; in a real
//! service it is the shared database).
//!
//! The deposit handler reads the balance, awaits (a database round trip, say), then writes: without
//! the lock, concurrent deposits would lose updates. It also passes the lock's fencing token to the
//! store, which refuses writes older than one it has seen.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{get, put};
use axum::Router;
use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use metrics_exporter_prometheus::PrometheusBuilder;
use tower_lock::key::{self, KeyExtractor};
use tower_lock::{LockInfo, LockLayer, LockManager, LockOptions};

#[path = "common/ready.rs"]
mod ready;
#[path = "common/signal.rs"]
mod signal;

/// Balances, and for each account the highest fencing token that wrote it.
#[derive(Default)]
struct Store {
    accounts: Mutex<HashMap<u64, (i64, u64)>>,
}

impl Store {
    fn read(&self, id: u64) -> (i64, u64) {
        let accounts = self.accounts.lock().unwrap_or_else(|p| p.into_inner());
        accounts.get(&id).copied().unwrap_or((0, 0))
    }

    /// Write unless a newer lock holder has written already.
    fn write(&self, id: u64, balance: i64, token: u64) -> Result<(), String> {
        let mut accounts = self.accounts.lock().unwrap_or_else(|p| p.into_inner());
        let entry = accounts.entry(id).or_insert((0, 0));
        if token < entry.1 {
            return Err(format!("stale fencing token {token} < {}", entry.1));
        }
        *entry = (balance, token);
        Ok(())
    }
}

async fn balance(State(store): State<Arc<Store>>, Path(id): Path<u64>) -> String {
    store.read(id).0.to_string()
}

async fn deposit(
    State(store): State<Arc<Store>>,
    Path((id, amount)): Path<(u64, i64)>,
    lock: LockInfo,
) -> Result<String, (StatusCode, String)> {
    let (balance, _) = store.read(id);
    tokio::time::sleep(Duration::from_millis(1)).await; // a database round trip
    let balance = balance + amount;
    store
        .write(id, balance, lock.fencing_token())
        .map_err(|err| (StatusCode::CONFLICT, err))?;
    Ok(balance.to_string())
}

fn app(manager: LockManager, store: Arc<Store>) -> Router {
    // "/accounts/42/deposit/10" locks "accounts/42"; reads take no lock.
    let locks = LockLayer::new(
        manager.clone(),
        key::pattern("/accounts/{id}").skip_methods(["GET", "HEAD"]),
    )
    .options(LockOptions::exclusive().wait_timeout(Duration::from_secs(10)))
    .max_waiters(1000);
    Router::new()
        .route("/accounts/{id}", get(balance))
        .route("/accounts/{id}/deposit/{amount}", put(deposit))
        .route_layer(locks)
        // after the lock layer: the probe takes no lock
        .route("/ready", ready::ready(manager))
        .with_state(store)
}

/// `/metrics`: what the process recorded, in Prometheus's text format. The recorder is installed
/// before the manager is built, so that every metric carries its help text.
fn metrics() -> Result<Router, Box<dyn std::error::Error>> {
    let exporter = PrometheusBuilder::new().install_recorder()?;
    let render = move || std::future::ready(exporter.render());
    Ok(Router::new().route("/metrics", get(render)))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let metrics = metrics()?;
    let manager = match std::env::var("REDIS_URL") {
        Ok(url) => LockManager::redis(&url).await?,
        Err(_) => LockManager::memory(),
    };
    let store = Arc::new(Store::default());
    let serve_only = std::env::args().any(|arg| arg == "serve");
    let addr = match std::env::var("ADDR") {
        Ok(addr) => addr,
        Err(_) if serve_only => "127.0.0.1:3000".to_owned(),
        Err(_) => "127.0.0.1:0".to_owned(),
    };
    let listener = tokio::net::TcpListener::bind(&addr).await?;
    let addr = listener.local_addr()?;
    let server = axum::serve(listener, app(manager.clone(), store).merge(metrics));
    if serve_only {
        println!("listening on http://{addr}");
        server
            .with_graceful_shutdown(signal::shutdown_signal())
            .await?;
        // the requests have drained: free what this replica still holds for the others at once
        manager.shutdown().await?;
        println!("stopped");
        return Ok(());
    }
    tokio::spawn(async move { server.await });

    let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    let deposits = (0..100).map(|_| {
        let client = client.clone();
        tokio::spawn(async move {
            let req = http::Request::put(format!("http://{addr}/accounts/1/deposit/10"))
                .body(Empty::new())?;
            let status = client.request(req).await?.status();
            Ok::<_, Box<dyn std::error::Error + Send + Sync>>(status)
        })
    });
    let mut ok = 0;
    for deposit in futures_util::future::join_all(deposits).await {
        if deposit?.map_err(|err| err.to_string())? == StatusCode::OK {
            ok += 1;
        }
    }
    let req = http::Request::get(format!("http://{addr}/accounts/1")).body(Empty::new())?;
    let body = client.request(req).await?.into_body().collect().await?;
    let balance = String::from_utf8_lossy(&body.to_bytes()).into_owned();
    println!("{ok} of 100 concurrent deposits of 10 succeeded; balance of account 1: {balance}");
    manager.shutdown().await?;
    Ok(())
}
