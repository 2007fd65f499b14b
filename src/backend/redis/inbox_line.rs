//! The connection of an inbox's live subscription, shared with readiness probes: `ping()` asks
//! whether the inbox is subscribed and answers now.

use std::sync::Arc;
use std::time::Duration;

use redis::aio::MultiplexedConnection;

/// The connection of an inbox's live subscription (none while it reconnects), which a readiness
/// probe PINGs.
#[derive(Clone)]
pub(crate) struct InboxLine {
    conn: Arc<std::sync::Mutex<Option<MultiplexedConnection>>>,
    timeout: Duration,
}

impl InboxLine {
    /// A line with no connection yet, whose PINGs wait at most `timeout`.
    pub(super) fn new(timeout: Duration) -> Self {
        InboxLine {
            conn: Arc::default(),
            timeout,
        }
    }

    /// The subscription's connection now (`None`: it reconnects).
    pub(super) fn set(&self, conn: Option<MultiplexedConnection>) {
        *self.conn.lock().unwrap_or_else(|p| p.into_inner()) = conn;
    }

    /// Whether the subscription is live and its connection answers a PING within the command
    /// timeout.
    pub(crate) async fn ping(&self) -> Result<(), crate::error::BoxError> {
        let conn = self.conn.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let Some(mut conn) = conn else {
            return Err("disconnected, reconnecting".into());
        };
        let cmd = redis::cmd("PING");
        let ping = cmd.query_async::<redis::Value>(&mut conn);
        match tokio::time::timeout(self.timeout, ping).await {
            Ok(answer) => answer.map(drop).map_err(Into::into),
            Err(_) => Err(format!("no answer to PING within {:?}", self.timeout).into()),
        }
    }
}

/// Empties an inbox's line when the inbox stops.
pub(super) struct Forget(pub(super) InboxLine);

impl Drop for Forget {
    fn drop(&mut self) {
        self.0.set(None);
    }
}
