//! What a connection to a Redis server that failed to open says: where it went (`host:port`),
//! and, when something other than Redis answered there, what that is. A user who typed the port
//! of an HTTP server or a database reads that, not "broken pipe" or a RESP parse error.

use std::io;
use std::time::Duration;

use redis::{ConnectionAddr, RedisError};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::locator::Locator;

/// The first bytes of every RESP2 and RESP3 answer.
const RESP_TYPES: &[u8] = b"+-:$*_,#!=(%~>|";

/// `err`, the failure to open a connection to `server`, as an error that names the server and,
/// when the failure came after the connection was made, what answered instead of Redis (asked
/// with one PING on a connection of its own, within `timeout`). An I/O error stays an I/O
/// error of the same kind.
pub(crate) async fn explain(err: RedisError, server: &Locator, timeout: Duration) -> RedisError {
    let kind = io_kind(&err);
    let place = server.describe();
    let after_connecting = !matches!(
        kind,
        Some(io::ErrorKind::ConnectionRefused | io::ErrorKind::TimedOut)
    ) && err.code().is_none()
        && err.kind() != redis::ErrorKind::AuthenticationFailed;
    if after_connecting {
        if let Some(what) = probe(server, timeout).await {
            let text = format!("{place} is not a Redis server: {what}");
            return io::Error::new(io::ErrorKind::InvalidData, text).into();
        }
    }
    match kind {
        Some(kind) => io::Error::new(kind, format!("cannot connect to Redis at {place}: {err}")),
        None => io::Error::other(format!("Redis at {place}: {err}")),
    }
    .into()
}

/// The I/O error kind behind `err`, if it is an I/O error.
fn io_kind(err: &RedisError) -> Option<io::ErrorKind> {
    if !err.is_io_error() {
        return None;
    }
    let source = std::error::Error::source(err);
    Some(match source.and_then(|s| s.downcast_ref::<io::Error>()) {
        Some(io) => io.kind(),
        None => io::ErrorKind::Other,
    })
}

/// What listens at `server` if it is not Redis: it is sent a PING, and its first bytes (or its
/// silence) tell. `None` when it answers as Redis does, or cannot be asked (TLS, a Unix socket,
/// no connection).
async fn probe(server: &Locator, timeout: Duration) -> Option<String> {
    let asking = async {
        let info = server.current().await.ok()?;
        let ConnectionAddr::Tcp(host, port) = info.addr() else {
            return None;
        };
        let mut stream = TcpStream::connect((host.as_str(), *port)).await.ok()?;
        // a server that closes at once may refuse the write: its silence still tells
        let _ = stream.write_all(b"*1\r\n$4\r\nPING\r\n").await;
        let mut answer = [0u8; 64];
        let read = stream.read(&mut answer).await.unwrap_or(0);
        Some(classify(&answer[..read]))
    };
    tokio::time::timeout(timeout, asking).await.ok().flatten()?
}

/// What answered a PING with `answer` (empty: it closed the connection), if not Redis.
fn classify(answer: &[u8]) -> Option<String> {
    let Some(&first) = answer.first() else {
        return Some(
            "it closed the connection without answering PING (a PostgreSQL or other server; \
             a Redis that expects TLS needs a rediss:// URL)"
                .to_owned(),
        );
    };
    if RESP_TYPES.contains(&first) {
        return None;
    }
    let shown = String::from_utf8_lossy(answer);
    let line = shown.lines().next().unwrap_or_default();
    if answer.starts_with(b"HTTP/") {
        return Some(format!("an HTTP server answered ({line:?})"));
    }
    if matches!(first, 0x15 | 0x16) {
        return Some("it answered with TLS: use a rediss:// URL".to_owned());
    }
    Some(format!(
        "it answered {line:?}, which is not the Redis protocol"
    ))
}

#[cfg(test)]
mod tests {
    use super::classify;

    #[test]
    fn answers_tell_redis_from_other_servers() {
        assert_eq!(classify(b"+PONG\r\n"), None);
        assert_eq!(classify(b"-NOAUTH Authentication required.\r\n"), None);
        let http = classify(b"HTTP/1.1 400 Bad Request\r\n\r\n").unwrap_or_default();
        assert!(
            http.contains("HTTP server") && http.contains("400 Bad Request"),
            "{http}"
        );
        let closed = classify(b"").unwrap_or_default();
        assert!(closed.contains("closed the connection"), "{closed}");
        let tls = classify(&[0x15, 0x03, 0x01]).unwrap_or_default();
        assert!(tls.contains("rediss://"), "{tls}");
        let other = classify(b"SSH-2.0-OpenSSH_9.6\r\n").unwrap_or_default();
        assert!(
            other.contains("SSH-2.0") && other.contains("not the Redis"),
            "{other}"
        );
    }
}
