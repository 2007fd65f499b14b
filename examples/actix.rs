//! An actix-web service whose deposits to one account run one at a time, in every replica.
//!
//! ```text
//! cargo run --example actix --features actix                 # demo: 100 concurrent deposits, then exit
//! cargo run --example actix --features actix -- serve        # serve on 127.0.0.1:3000 until Ctrl-C or SIGTERM
//! REDIS_URL=redis://127.0.0.1:6379 cargo run --example actix --features actix,metrics -- serve
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
//! the lock, concurrent deposits would lose updates. It reads the lock's fencing token through
//! `web::ReqData<LockInfo>` and passes it to the store, which refuses writes older than one it has
//! seen.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use actix_web::{web, App, HttpResponse, HttpServer};
use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use tower_lock::actix::LockMiddleware;
use tower_lock::key::{self, KeyExtractor};
use tower_lock::{LockInfo, LockManager, LockOptions};

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

async fn balance(store: web::Data<Store>, id: web::Path<u64>) -> String {
    store.read(*id).0.to_string()
}

async fn deposit(
    store: web::Data<Store>,
    path: web::Path<(u64, i64)>,
    lock: web::ReqData<LockInfo>,
) -> HttpResponse {
    let (id, amount) = path.into_inner();
    let (balance, _) = store.read(id);
    tokio::time::sleep(Duration::from_millis(1)).await; // a database round trip
    let balance = balance + amount;
    match store.write(id, balance, lock.fencing_token()) {
        Ok(()) => HttpResponse::Ok().body(balance.to_string()),
        Err(err) => HttpResponse::Conflict().body(err),
    }
}

/// `/metrics`: what the process recorded, in Prometheus's text format.
fn render(exporter: PrometheusHandle) -> impl Fn() -> std::future::Ready<String> + Clone + 'static {
    move || std::future::ready(exporter.render())
}

/// `GET /ready`: 200 while a lock can be taken, else 503 with the reason (a load balancer or
/// Kubernetes then sends the requests to the replicas that can serve them). A GET takes no lock.
async fn ready(manager: web::Data<LockManager>) -> HttpResponse {
    match manager.ping().await {
        Ok(()) => HttpResponse::Ok().body("ready\n"),
        Err(err) => HttpResponse::ServiceUnavailable().body(format!("{err}\n")),
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Installed before the manager is built, so that every metric carries its help text.
    let exporter = PrometheusBuilder::new().install_recorder()?;
    // One manager per process, built before the server; every worker shares it.
    let manager = match std::env::var("REDIS_URL") {
        Ok(url) => LockManager::redis(&url).await?,
        Err(_) => LockManager::memory(),
    };
    // "/accounts/42/deposit/10" locks "accounts/42"; reads take no lock. Built once and cloned into
    // each worker, so that the waiter limit counts every worker's waiters together.
    let locks = LockMiddleware::new(
        manager.clone(),
        key::pattern("/accounts/{id}").skip_methods(["GET", "HEAD"]),
    )
    .options(LockOptions::exclusive().wait_timeout(Duration::from_secs(10)))
    .max_waiters(1000);
    let store = web::Data::new(Store::default());
    let probed = web::Data::new(manager.clone());

    let serve_only = std::env::args().any(|arg| arg == "serve");
    let addr = match std::env::var("ADDR") {
        Ok(addr) => addr,
        Err(_) if serve_only => "127.0.0.1:3000".to_owned(),
        Err(_) => "127.0.0.1:0".to_owned(),
    };
    let server = HttpServer::new(move || {
        App::new()
            .app_data(store.clone())
            .app_data(probed.clone())
            .wrap(locks.clone())
            .route("/ready", web::get().to(ready))
            .route("/accounts/{id}", web::get().to(balance))
            .route("/metrics", web::get().to(render(exporter.clone())))
            .route("/accounts/{id}/deposit/{amount}", web::put().to(deposit))
    })
    .workers(2)
    .bind(&addr)?;
    let addr = server.addrs()[0];
    if serve_only {
        println!("listening on http://{addr}");
        // Ctrl-C or SIGTERM stops it, once the requests in flight are done
        let server = server.disable_signals().run();
        let handle = server.handle();
        let stopping = signal::shutdown_signal();
        tokio::spawn(async move {
            stopping.await;
            handle.stop(true).await;
        });
        server.await?;
        // free what this replica still holds for the others at once
        manager.shutdown().await?;
        println!("stopped");
        return Ok(());
    }
    let server = server.disable_signals().run();
    let handle = server.handle();
    tokio::spawn(server);

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
        if deposit?.map_err(|err| err.to_string())? == http::StatusCode::OK {
            ok += 1;
        }
    }
    let req = http::Request::get(format!("http://{addr}/accounts/1")).body(Empty::new())?;
    let body = client.request(req).await?.into_body().collect().await?;
    let balance = String::from_utf8_lossy(&body.to_bytes()).into_owned();
    println!("{ok} of 100 concurrent deposits of 10 succeeded; balance of account 1: {balance}");
    handle.stop(true).await;
    manager.shutdown().await?;
    Ok(())
}
