//! Errors name what is wrong: a URL that does not parse shows it (password masked) and the form
//! expected; a server that refuses or cannot be reached is named by `host:port`; a port where
//! something else than Redis answers (an HTTP server, PostgreSQL) says so.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::time::Duration;

use tower_lock::{LockError, LockManager};

use crate::support::free_port;

/// The manager of `url`, built with a short command timeout: it must fail.
async fn build_err(url: &str) -> LockError {
    let built = LockManager::builder()
        .redis(url)
        .command_timeout(Duration::from_secs(2))
        .build()
        .await;
    built.expect_err("no manager")
}

#[tokio::test]
async fn an_unparsable_url_is_shown_masked_with_the_expected_form() {
    let err = build_err("redis://app:s3cret@127.0.0.1:6379/x").await;
    let text = err.to_string();
    assert!(matches!(err, LockError::Config(_)), "{err:?}");
    assert!(!text.contains("s3cret"), "{text}");
    assert!(text.contains("redis://app:***@127.0.0.1:6379/x"), "{text}");
    assert!(
        text.contains("redis://[user:password@]host:port[/db]"),
        "{text}"
    );

    let err = build_err("localhost:6379").await;
    let text = err.to_string();
    assert!(text.contains("\"localhost:6379\""), "{text}");
    assert!(
        text.contains("redis://[user:password@]host:port[/db]"),
        "{text}"
    );
}

#[tokio::test]
async fn a_refused_connection_names_host_and_port() {
    let port = free_port();
    let err = build_err(&format!("redis://127.0.0.1:{port}")).await;
    let text = err.to_string();
    assert!(err.is_unavailable(), "{err:?}");
    assert!(text.contains(&format!("127.0.0.1:{port}")), "{text}");
    assert!(text.to_lowercase().contains("refused"), "{text}");
}

#[tokio::test]
async fn an_unknown_host_is_named() {
    let err = build_err("redis://no-such-host.invalid:6379").await;
    let text = err.to_string();
    assert!(err.is_unavailable(), "{err:?}");
    assert!(text.contains("no-such-host.invalid:6379"), "{text}");
}

/// A listener that answers every connection like an HTTP server would, then closes it.
fn http_server() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            std::thread::spawn(move || {
                let mut buf = [0u8; 1024];
                let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
                let _ = stream.read(&mut buf);
                let body =
                    "HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\nconnection: close\r\n\r\n";
                let _ = stream.write_all(body.as_bytes());
            });
        }
    });
    port
}

#[tokio::test]
async fn an_http_server_is_not_taken_for_redis() {
    let port = http_server();
    let err = build_err(&format!("redis://127.0.0.1:{port}")).await;
    let text = err.to_string();
    assert!(err.is_unavailable(), "{err:?}");
    assert!(text.contains(&format!("127.0.0.1:{port}")), "{text}");
    assert!(text.contains("not a Redis server"), "{text}");
    assert!(text.contains("HTTP"), "{text}");
}

/// The PostgreSQL of `DATABASE_URL` (127.0.0.1:5432 in the test setup), if one listens.
fn postgres_port() -> Option<u16> {
    let url = std::env::var("DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".to_owned());
    let port = (url.rsplit_once(':')?.1).split('/').next()?.parse().ok()?;
    std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    Some(port)
}

#[tokio::test]
async fn a_postgres_server_is_not_taken_for_redis() {
    let port = postgres_port().expect("PostgreSQL listens at DATABASE_URL's port");
    let err = build_err(&format!("redis://127.0.0.1:{port}")).await;
    let text = err.to_string();
    assert!(err.is_unavailable(), "{err:?}");
    assert!(text.contains(&format!("127.0.0.1:{port}")), "{text}");
    assert!(text.contains("not a Redis server"), "{text}");
}

/// At run time too: once the server is gone, the call that opens a new connection names the
/// server that refused it.
#[tokio::test]
async fn a_call_on_a_server_that_went_away_names_it() {
    let mut server = crate::support::RedisServer::start();
    let m = LockManager::builder()
        .redis(server.url())
        .command_timeout(Duration::from_secs(2))
        .build()
        .await
        .unwrap();
    let opts = tower_lock::LockOptions::exclusive();
    drop(m.acquire("k", &opts).await.unwrap());
    server.kill();
    let mut last = String::new();
    // the first call may go out on the connection that just died; a later one opens a new one
    for _ in 0..3 {
        last = m.try_acquire("k", &opts).await.unwrap_err().to_string();
    }
    let place = format!("127.0.0.1:{}", server.port());
    assert!(last.contains(&place) && last.contains("refused"), "{last}");
}

/// A quorum whose majority is unreachable says which masters, and why each.
#[tokio::test]
async fn a_quorum_names_each_unreachable_master() {
    let server = crate::support::RedisServer::start();
    let (closed, http) = (free_port(), http_server());
    let urls = [
        server.url(),
        format!("redis://127.0.0.1:{closed}"),
        format!("redis://127.0.0.1:{http}"),
    ];
    let built = LockManager::builder()
        .quorum(urls)
        .command_timeout(Duration::from_secs(2))
        .build()
        .await;
    let text = built.expect_err("no majority").to_string();
    assert!(text.contains("only 1 of 3"), "{text}");
    let refused = format!("cannot connect to Redis at 127.0.0.1:{closed}");
    assert!(text.contains(&refused), "{text}");
    let not_redis = format!("127.0.0.1:{http} is not a Redis server");
    assert!(text.contains(&not_redis), "{text}");
}
