//! Fencing tokens checked by PostgreSQL: a write from a holder whose lease ran out is refused.
//!
//! ```text
//! cargo run --example fencing_postgres --features axum              # the demonstration below, then exit
//! cargo run --example fencing_postgres --features axum -- serve     # serve on 127.0.0.1:3000 until Ctrl-C or SIGTERM
//! DATABASE_URL=postgres://user@host/db REDIS_URL=redis://127.0.0.1:6379 cargo run --example fencing_postgres --features axum
//! ```
//!
//! PostgreSQL is taken from `DATABASE_URL` (default `postgres://postgres@127.0.0.1:5432/postgres`);
//! locks are in memory, or on Redis when `REDIS_URL` is set. The accounts table is a temporary one,
//! so the example leaves nothing behind.
//!
//! `PUT /accounts/{id}/deposit` (body: the amount) runs under the lock of its account, taken by the
//! `LockLayer`. Its handler reads the balance, adds the amount, and writes the result through a
//! *fenced* UPDATE carrying the lock's fencing token (the handler's `LockInfo`
//! argument):
//!
//! ```sql
//! UPDATE accounts SET balance = $3, token = $1 WHERE id = $2 AND token < $1
//! ```
//!
//! The row is written only by a holder whose token is above the one that wrote it last. A holder
//! that paused past its lease (a GC pause, a partition) may still believe it holds the lock; by
//! then another one may have taken the lock and written with a higher token, so the late write
//! updates 0 rows instead of erasing the newer one.
//!
//! Without `serve`, `main` shows exactly that, without any HTTP client: holder A takes the lock of
//! account 1 on a 300 ms lease, reads the balance and pauses; a deposit request (sent straight
//! into the router) waits for the lock, gets it once A's lease has run out, and writes; A resumes
//! and its write is refused. With `serve`, try
//! `curl -X PUT localhost:3000/accounts/1/deposit -d 10` and `curl localhost:3000/ready`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{Request, StatusCode};
use axum::routing::put;
use axum::Router;
use http_body_util::BodyExt;
use tokio_postgres::{Client, NoTls};
use tower::ServiceExt;
use tower_lock::{key, LockInfo, LockLayer, LockManager, LockOptions};

#[path = "common/ready.rs"]
mod ready;
#[path = "common/signal.rs"]
mod signal;

type Error = Box<dyn std::error::Error + Send + Sync>;

/// The lease of the holder that pauses in the demonstration.
const SHORT_LEASE: Duration = Duration::from_millis(300);

/// The fenced write: sets the balance if `token` is above the token that wrote the row last.
/// Returns the number of rows updated: 1, or 0 when a newer holder has written already.
async fn fenced_write(db: &Client, id: i64, balance: i64, token: u64) -> Result<u64, Error> {
    let token = i64::try_from(token)?; // tokens are µs-clock sized: they fit a bigint
    let rows = db
        .execute(
            "UPDATE accounts SET balance = $3, token = $1 WHERE id = $2 AND token < $1",
            &[&token, &id, &balance],
        )
        .await?;
    Ok(rows)
}

/// The account's balance, creating the account (balance 0, token 0) on first use.
async fn read_balance(db: &Client, id: i64) -> Result<i64, Error> {
    db.execute(
        "INSERT INTO accounts (id, balance, token) VALUES ($1, 0, 0) ON CONFLICT (id) DO NOTHING",
        &[&id],
    )
    .await?;
    let row = db
        .query_one("SELECT balance FROM accounts WHERE id = $1", &[&id])
        .await?;
    Ok(row.get(0))
}

/// `PUT /accounts/{id}/deposit`, run under the account's lock by the `LockLayer`.
async fn deposit(
    State(db): State<Arc<Client>>,
    Path(id): Path<i64>,
    lock: LockInfo,
    amount: String,
) -> Result<String, (StatusCode, String)> {
    let amount: i64 = amount
        .trim()
        .parse()
        .map_err(|err| (StatusCode::BAD_REQUEST, format!("amount: {err}\n")))?;
    let internal = |err: Error| (StatusCode::INTERNAL_SERVER_ERROR, format!("{err}\n"));
    let balance = read_balance(&db, id).await.map_err(internal)? + amount;
    let token = lock.fencing_token();
    let rows = fenced_write(&db, id, balance, token)
        .await
        .map_err(internal)?;
    match rows {
        1 => Ok(format!(
            "account {id}: balance {balance} (lock {}, fencing token {token})\n",
            lock.key()
        )),
        _ => Err((
            StatusCode::CONFLICT,
            format!("account {id}: refused, a newer lock holder wrote it (our token {token})\n"),
        )),
    }
}

fn app(manager: LockManager, db: Arc<Client>) -> Router {
    // "/accounts/1/deposit" locks "accounts/1", the key `account_key(1)` spells.
    let locks = LockLayer::new(manager.clone(), key::pattern("/accounts/{id}"))
        .options(LockOptions::exclusive().wait_timeout(Duration::from_secs(10)));
    Router::new()
        .route("/accounts/{id}/deposit", put(deposit))
        .route_layer(locks)
        // after the lock layer: the readiness probe takes no lock
        .route("/ready", ready::ready(manager))
        .with_state(db)
}

fn account_key(id: i64) -> String {
    format!("accounts/{id}")
}

/// Sends a deposit straight into the router (no socket, no HTTP client); returns status and body.
async fn send_deposit(app: Router, id: i64, amount: i64) -> Result<(StatusCode, String), Error> {
    let req =
        Request::put(format!("/accounts/{id}/deposit")).body(Body::from(amount.to_string()))?;
    let res = app.oneshot(req).await?;
    let status = res.status();
    let body = res.into_body().collect().await?.to_bytes();
    Ok((status, String::from_utf8_lossy(&body).trim_end().to_owned()))
}

/// Holder A pauses past its lease while a deposit request takes the lock and writes; A's late write
/// is refused by PostgreSQL.
async fn demonstrate(manager: &LockManager, db: &Client, app: Router) -> Result<(), Error> {
    let (status, body) = send_deposit(app.clone(), 1, 10).await?;
    println!("PUT /accounts/1/deposit 10      -> {status}: {body}");

    let start = Instant::now();
    let a = manager
        .acquire(
            &account_key(1),
            &LockOptions::exclusive().lease(SHORT_LEASE),
        )
        .await?;
    let balance = read_balance(db, 1).await?;
    println!(
        "holder A: takes accounts/1 with fencing token {} on a {} ms lease, reads balance {balance}, pauses",
        a.fencing_token(),
        SHORT_LEASE.as_millis()
    );

    // While A pauses, a deposit waits for the lock, gets it once A's lease has run out, and writes.
    let (status, body) = send_deposit(app, 1, 5).await?;
    println!(
        "PUT /accounts/1/deposit 5       -> {status} after {} ms: {body}",
        start.elapsed().as_millis()
    );

    // A resumes, still believing it holds the lock, and writes what it computed before the pause.
    println!(
        "holder A: resumes after {} ms; guard.is_lost() = {}; writes balance {} with token {}",
        start.elapsed().as_millis(),
        a.is_lost(),
        balance + 100,
        a.fencing_token()
    );
    match fenced_write(db, 1, balance + 100, a.fencing_token()).await? {
        0 => println!("holder A: PostgreSQL refused the late write (0 rows updated)"),
        n => println!("holder A: PostgreSQL applied the late write ({n} row) - NOT fenced!"),
    }
    let row = db
        .query_one("SELECT balance, token FROM accounts WHERE id = 1", &[])
        .await?;
    let (balance, token): (i64, i64) = (row.get(0), row.get(1));
    println!("account 1: balance {balance}, written by token {token}");
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    let manager = match std::env::var("REDIS_URL") {
        Ok(url) => LockManager::redis(&url).await?,
        Err(_) => LockManager::memory(),
    };
    let url = std::env::var("DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".to_owned());
    let (db, connection) = tokio_postgres::connect(&url, NoTls).await?;
    tokio::spawn(async move {
        if let Err(err) = connection.await {
            eprintln!("postgres connection: {err}");
        }
    });
    // Temporary: it lives as long as this connection. In a service, it is your accounts table
    // with one more column, the token of the last write.
    db.batch_execute(
        "CREATE TEMPORARY TABLE accounts (
             id bigint PRIMARY KEY,
             balance bigint NOT NULL,
             token bigint NOT NULL
         )",
    )
    .await?;
    let db = Arc::new(db);
    let app = app(manager.clone(), db.clone());

    if std::env::args().any(|arg| arg == "serve") {
        let addr = std::env::var("ADDR").unwrap_or_else(|_| "127.0.0.1:3000".to_owned());
        let listener = tokio::net::TcpListener::bind(&addr).await?;
        println!("listening on http://{}", listener.local_addr()?);
        axum::serve(listener, app)
            .with_graceful_shutdown(signal::shutdown_signal())
            .await?;
        // the requests have drained: free what this replica still holds for the others at once
        manager.shutdown().await?;
        println!("stopped");
        return Ok(());
    }
    demonstrate(&manager, &db, app).await?;
    manager.shutdown().await?;
    Ok(())
}
