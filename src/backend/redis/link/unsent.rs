//! Commands a failed link refused: they never reached the server, so another connection may
//! carry them whatever they do (an acquire, a release), which a command that was sent and lost its
//! answer may not.

use std::io;
use std::sync::Arc;

use redis::RedisError;

use super::Failure;

/// Why a command never went out: its link had failed before. Another connection may carry it
/// whatever it does, since the server never saw it.
#[derive(Debug)]
struct NotSent(String);

impl std::fmt::Display for NotSent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}; the command was not sent", self.0)
    }
}

impl std::error::Error for NotSent {}

impl Failure {
    /// The error of a command refused by the failed link: it was never sent.
    pub(super) fn not_sent(&self) -> RedisError {
        io::Error::new(io::ErrorKind::NotConnected, NotSent(self.1.clone())).into()
    }
}

/// Whether `err` says the command never went out, its connection having failed before: sending
/// it again, on another connection, is safe whatever it does.
pub(crate) fn was_not_sent(err: &RedisError) -> bool {
    let Some(source) = std::error::Error::source(err) else {
        return false;
    };
    // redis-rs keeps the I/O error behind an `Arc`
    let shared = source.downcast_ref::<Arc<dyn std::error::Error + Send + Sync>>();
    let io = match shared {
        Some(shared) => shared.downcast_ref::<io::Error>(),
        None => source.downcast_ref::<io::Error>(),
    };
    io.and_then(io::Error::get_ref)
        .is_some_and(|inner| inner.is::<NotSent>())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use redis::RedisConnectionInfo;
    use tokio::net::TcpListener;

    use super::*;
    use crate::backend::redis::link::Link;

    /// A link to a server that closes it at once.
    async fn closed_link() -> Link {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let port = listener.local_addr().expect("address").port();
        let accepting = tokio::spawn(async move { drop(listener.accept().await) });
        let settings = RedisConnectionInfo::default();
        let link = Link::open("127.0.0.1", port, &settings, Duration::from_secs(5)).await;
        accepting.await.expect("accepted");
        link.expect("open")
    }

    #[tokio::test]
    async fn a_command_on_a_link_found_closed_fails_as_not_sent() {
        let link = closed_link().await;
        for _ in 0..500 {
            if !link.is_open() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(!link.is_open(), "the reader found the close");
        let err = link.query(&redis::cmd("PING")).await.expect_err("closed");
        assert!(was_not_sent(&err), "{err}");
        assert!(err.is_connection_dropped(), "{err}");
    }

    #[test]
    fn a_failure_of_a_sent_command_is_not_taken_for_one_not_sent() {
        let failure = Failure(io::ErrorKind::BrokenPipe, "closed".into());
        assert!(!was_not_sent(&failure.error()));
        assert!(was_not_sent(&failure.not_sent()));
        let other: RedisError = io::Error::new(io::ErrorKind::NotConnected, "elsewhere").into();
        assert!(!was_not_sent(&other));
    }
}
