//! Fencing tokens checked by a real storage: PostgreSQL at `DATABASE_URL` (default
//! `postgres://postgres@127.0.0.1:5432/postgres`; `scripts/test.sh` starts one when none answers),
//! locks on a real `redis-server`.
//!
//! Every write is a fenced UPDATE: `SET token = $1 ... WHERE id = $2 AND token < $1`, so a row is
//! updated only by a holder whose token is above the one that last wrote it. A holder that pauses
//! past its lease while another one acquires and writes finds its late write refused (0 rows), and
//! the row keeps the newer holder's value. Each test has its own table, so tests run in parallel.

#[path = "support/mod.rs"]
mod support;

use std::future::Future;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use support::RedisServer;
use tokio::sync::oneshot;
use tokio_postgres::{Client, NoTls};
use tower_lock::{LockManager, LockOptions};

/// The lease of the holder that pauses: short, fixed (no watchdog renews it).
const SHORT_LEASE: Duration = Duration::from_millis(300);
/// A bound on every wait that should end much sooner; only reached when something is broken.
const PATIENCE: Duration = Duration::from_secs(30);
const ACCOUNT: i64 = 42;

fn database_url() -> String {
    std::env::var("DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".to_owned())
}

/// A new connection to the test database; its connection task runs on the test's runtime.
async fn connect() -> Client {
    let url = database_url();
    let (client, connection) = tokio_postgres::connect(&url, NoTls)
        .await
        .unwrap_or_else(|err| {
            panic!("cannot connect to PostgreSQL at {url} ({err}); run the tests with scripts/test.sh, which starts one")
        });
    tokio::spawn(async move {
        if let Err(err) = connection.await {
            eprintln!("postgres connection: {err}");
        }
    });
    client
}

/// A table name no other test, nor another run of the suite, uses at the same time.
fn unique_table(test: &str) -> String {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    format!(
        "tower_lock_fencing_{test}_{}_{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// Creates an accounts table holding account [`ACCOUNT`] with balance 0 and token 0, runs `test`
/// with its name, and drops the table, also when `test` panics (the panic then goes on).
async fn with_accounts_table<F, Fut>(test: &str, body: F)
where
    F: FnOnce(String) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let table = unique_table(test);
    let db = connect().await;
    db.batch_execute(&format!(
        "CREATE TABLE {table} (id bigint PRIMARY KEY, balance bigint NOT NULL, token bigint NOT NULL);
         INSERT INTO {table} VALUES ({ACCOUNT}, 0, 0);"
    ))
    .await
    .expect("create table");
    let outcome = tokio::spawn(body(table.clone())).await;
    db.batch_execute(&format!("DROP TABLE {table}"))
        .await
        .expect("drop table");
    if let Err(err) = outcome {
        std::panic::resume_unwind(err.into_panic());
    }
}

/// The fenced write: sets the balance if `token` is above the one that wrote the row last.
/// Returns the number of rows updated: 1, or 0 when a newer holder has written already.
async fn fenced_write(db: &Client, table: &str, token: u64, balance: i64) -> u64 {
    let token = i64::try_from(token).expect("fencing token fits a bigint");
    db.execute(
        &format!("UPDATE {table} SET balance = $3, token = $1 WHERE id = $2 AND token < $1"),
        &[&token, &ACCOUNT, &balance],
    )
    .await
    .expect("fenced update")
}

/// The row's (balance, token).
async fn read(db: &Client, table: &str) -> (i64, u64) {
    let row = db
        .query_one(
            &format!("SELECT balance, token FROM {table} WHERE id = $1"),
            &[&ACCOUNT],
        )
        .await
        .expect("select");
    let token: i64 = row.get(1);
    (row.get(0), u64::try_from(token).expect("token"))
}

async fn manager(server: &RedisServer) -> LockManager {
    LockManager::redis(&server.url())
        .await
        .expect("redis manager")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn holders_in_time_write_in_turn() {
    let server = RedisServer::start();
    let (ma, mb) = (manager(&server).await, manager(&server).await);
    with_accounts_table("in_time", move |table| async move {
        let (db_a, db_b) = (connect().await, connect().await);
        let key = format!("{table}:{ACCOUNT}");
        let opts = LockOptions::exclusive().lease(PATIENCE);

        let a = ma.acquire(&key, &opts).await.expect("A acquires");
        let (balance, _) = read(&db_a, &table).await;
        assert_eq!(
            fenced_write(&db_a, &table, a.fencing_token(), balance + 10).await,
            1
        );
        assert!(!a.is_lost());
        let token_a = a.fencing_token();
        a.release().await.expect("A releases");
        assert_eq!(read(&db_a, &table).await, (10, token_a));

        let b = mb.acquire(&key, &opts).await.expect("B acquires");
        assert!(b.fencing_token() > token_a);
        let (balance, _) = read(&db_b, &table).await;
        assert_eq!(
            fenced_write(&db_b, &table, b.fencing_token(), balance + 5).await,
            1
        );
        let token_b = b.fencing_token();
        b.release().await.expect("B releases");
        assert_eq!(read(&db_b, &table).await, (15, token_b));

        // the same token again is refused too: a token writes once, above the last
        assert_eq!(fenced_write(&db_a, &table, token_b, 99).await, 0);
        assert_eq!(read(&db_a, &table).await, (15, token_b));
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn late_write_of_a_paused_holder_is_refused() {
    let server = RedisServer::start();
    let (ma, mb) = (manager(&server).await, manager(&server).await);
    with_accounts_table("paused", move |table| async move {
        let (db_a, db_b) = (connect().await, connect().await);
        let key = format!("{table}:{ACCOUNT}");

        // A holds the lock on a short fixed lease and reads the balance...
        let a = ma
            .acquire(&key, &LockOptions::exclusive().lease(SHORT_LEASE))
            .await
            .expect("A acquires");
        let token_a = a.fencing_token();
        let (balance_a, _) = read(&db_a, &table).await;

        // ...then pauses (a GC pause, a partition) until B has acquired and written. B waits for
        // the lock, which frees itself once A's lease has run out in Redis.
        let (written, resume_a) = oneshot::channel();
        let table_b = table.clone();
        let b = tokio::spawn(async move {
            let opts = LockOptions::exclusive().wait_timeout(PATIENCE);
            let b = mb.acquire(&key, &opts).await.expect("B acquires");
            let (balance, _) = read(&db_b, &table_b).await;
            let rows = fenced_write(&db_b, &table_b, b.fencing_token(), balance + 5).await;
            let _ = written.send(());
            (b, rows)
        });
        tokio::time::timeout(PATIENCE, resume_a)
            .await
            .expect("B acquires and writes while A pauses")
            .expect("B's task");
        let (b, rows_b) = b.await.expect("B's task");
        assert_eq!(rows_b, 1, "B's write is applied");
        assert!(
            b.fencing_token() > token_a,
            "B's token {} is above A's {token_a}",
            b.fencing_token()
        );

        // A resumes and writes what it computed before the pause: too late.
        assert!(a.is_lost(), "A's lease is known lost when it writes late");
        assert_eq!(
            fenced_write(&db_a, &table, token_a, balance_a + 10).await,
            0,
            "PostgreSQL refuses A's late write"
        );
        assert_eq!(
            read(&db_a, &table).await,
            (5, b.fencing_token()),
            "the row holds B's write"
        );
        b.release().await.expect("B releases");
    })
    .await;
}

/// The watchdog lease of the holder an operator forces out: its renewals come every third of it.
const WATCHED_LEASE: Duration = Duration::from_secs(3);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forced_release_fences_the_old_holder_out() {
    let server = RedisServer::start();
    let ma = LockManager::builder()
        .redis(server.url())
        .lease(WATCHED_LEASE)
        .build()
        .await
        .expect("redis manager");
    let mb = manager(&server).await;
    with_accounts_table("forced", move |table| async move {
        let (db_a, db_b) = (connect().await, connect().await);
        let key = format!("{table}:{ACCOUNT}");
        // A holds the lock, kept by its watchdog, and reads the balance; then it hangs
        let a = ma
            .acquire(&key, &LockOptions::exclusive())
            .await
            .expect("A");
        let (token_a, (balance_a, _)) = (a.fencing_token(), read(&db_a, &table).await);
        let b = tokio::spawn({
            let (mb, key) = (mb.clone(), key.clone());
            async move {
                let opts = LockOptions::exclusive().wait_timeout(PATIENCE);
                mb.acquire(&key, &opts).await.expect("B acquires")
            }
        });
        while mb.inspect(&key).await.expect("inspect").waiters.is_empty() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        // an operator forces the lock on to B, which writes
        let forced_at = std::time::Instant::now();
        assert!(mb.force_release(&key).await.expect("force_release"));
        let b = tokio::time::timeout(PATIENCE, b)
            .await
            .expect("B gets it")
            .unwrap();
        assert!(
            b.fencing_token() > token_a,
            "{} > {token_a}",
            b.fencing_token()
        );
        let (balance, _) = read(&db_b, &table).await;
        assert_eq!(
            fenced_write(&db_b, &table, b.fencing_token(), balance + 5).await,
            1
        );
        // A learns at its next renewal; its late write is refused all the same
        let bound = WATCHED_LEASE / 3 + Duration::from_millis(100);
        tokio::time::timeout(bound.saturating_sub(forced_at.elapsed()), a.lost())
            .await
            .unwrap_or_else(|_| panic!("A's lost() fires within {bound:?} of the force"));
        assert_eq!(
            fenced_write(&db_a, &table, token_a, balance_a + 10).await,
            0,
            "PostgreSQL refuses the forced-out holder's write"
        );
        assert_eq!(read(&db_a, &table).await, (5, b.fencing_token()));
        b.release().await.expect("B releases");
    })
    .await;
}
