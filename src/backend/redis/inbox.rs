//! The inbox: this manager's ONE pub/sub connection. It subscribes once to the manager's own channel;
//! release scripts publish "lock K is free" (exclusive) or "lock K is granted to owner O with token
//! T" (fair) there, and the inbox hands each message to the one local waiter it concerns. When the connection drops it reconnects with backoff and wakes every local waiter to
//! re-check, since messages may have been lost meanwhile.

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use redis::aio::PubSubStream;
use redis::{Client, RedisError};
use tokio::sync::oneshot;

use crate::waiters::{LockId, WaitRegistry};

/// A message no local waiter could take: the backend must pass it on.
#[derive(Debug)]
pub(crate) enum Unclaimed {
    /// "Lock K is free", but nobody here waits for K any more.
    Wake(LockId),
    /// A fair grant to an owner that stopped waiting.
    Grant {
        lock: LockId,
        owner: String,
        token: u64,
    },
}

/// Parse a grant message: `g|<lock>|<owner>|<token>` (owner ids and tokens contain no `|`).
fn parse_grant(msg: &str) -> Option<(&str, &str, u64)> {
    let rest = msg.strip_prefix("g|")?;
    let (rest, token) = rest.rsplit_once('|')?;
    let (lock, owner) = rest.rsplit_once('|')?;
    Some((lock, owner, token.parse().ok()?))
}

const MIN_BACKOFF: Duration = Duration::from_millis(20);
const MAX_BACKOFF: Duration = Duration::from_secs(2);

/// The subscription of one manager.
#[derive(Debug, Clone)]
pub(crate) struct Inbox {
    client: Client,
    channel: String,
    timeout: Duration,
}

impl Inbox {
    pub(crate) fn new(client: Client, channel: String, timeout: Duration) -> Self {
        Inbox {
            client,
            channel,
            timeout,
        }
    }

    /// Connect and subscribe to this manager's channel.
    pub(crate) async fn subscribe(&self) -> Result<PubSubStream, RedisError> {
        let connect = async {
            let mut pubsub = self.client.get_async_pubsub().await?;
            pubsub.subscribe(&self.channel).await?;
            Ok(pubsub.into_on_message())
        };
        match tokio::time::timeout(self.timeout, connect).await {
            Ok(result) => result,
            Err(_) => Err(RedisError::from(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "timed out subscribing the lock inbox",
            ))),
        }
    }

    /// Deliver messages until `shutdown` fires (or its sender is dropped). `unclaimed` receives the
    /// locks whose wake-up no local waiter could take, to be passed on to another manager.
    pub(crate) async fn run(
        self,
        mut stream: PubSubStream,
        waiters: Arc<WaitRegistry>,
        unclaimed: impl Fn(Unclaimed) + Send,
        mut shutdown: oneshot::Receiver<()>,
    ) {
        loop {
            tokio::select! {
                _ = &mut shutdown => return,
                msg = stream.next() => match msg {
                    Some(msg) => {
                        let Ok(text) = std::str::from_utf8(msg.get_payload_bytes()) else {
                            continue;
                        };
                        if let Some((lock, owner, token)) = parse_grant(text) {
                            if !waiters.grant(lock, owner, token) {
                                unclaimed(Unclaimed::Grant {
                                    lock: Arc::from(lock),
                                    owner: owner.to_owned(),
                                    token,
                                });
                            }
                        } else if !waiters.wake_one(text) {
                            unclaimed(Unclaimed::Wake(Arc::from(text)));
                        }
                    }
                    None => {
                        tracing::warn!(channel = %self.channel, "lock inbox disconnected; reconnecting");
                        // Every waiter re-checks now: if Redis is gone they fail fast with an
                        // error instead of sleeping out the holder's lease.
                        waiters.wake_all();
                        tokio::select! {
                            _ = &mut shutdown => return,
                            s = self.reconnect() => stream = s,
                        }
                        // Releases published while we were away reached nobody: re-check them all.
                        waiters.wake_all();
                    }
                }
            }
        }
    }

    async fn reconnect(&self) -> PubSubStream {
        let mut backoff = MIN_BACKOFF;
        loop {
            tokio::time::sleep(jitter(backoff)).await;
            match self.subscribe().await {
                Ok(stream) => {
                    tracing::info!(channel = %self.channel, "lock inbox reconnected");
                    return stream;
                }
                Err(err) => {
                    tracing::warn!(channel = %self.channel, error = %err, "lock inbox reconnect failed");
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                }
            }
        }
    }
}

/// `d` plus up to 50% so that many managers do not reconnect in lockstep.
fn jitter(d: Duration) -> Duration {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|t| t.subsec_nanos())
        .unwrap_or(0);
    d + d.mul_f64(f64::from(nanos % 1000) / 2000.0)
}

#[cfg(test)]
mod tests {
    use super::parse_grant;

    #[test]
    fn grants_parse_even_when_the_lock_name_has_bars() {
        assert_eq!(
            parse_grant("g|{ns:a|b}|m1:7|1700000000000001"),
            Some(("{ns:a|b}", "m1:7", 1_700_000_000_000_001))
        );
        assert_eq!(parse_grant("{ns:a}"), None);
        assert_eq!(parse_grant("g|{ns:a}|m1:7|x"), None);
    }
}
