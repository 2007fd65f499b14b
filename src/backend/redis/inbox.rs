//! The inbox: this manager's ONE pub/sub connection. It subscribes once to the manager's own channel;
//! release scripts publish "lock K is free" (exclusive) or "lock K is granted to owner O with token
//! T" (fair) there, and the inbox hands each message to the one local waiter it concerns.
//!
//! The connection speaks RESP3, so messages arrive as pushes that the connection's own reader hands
//! straight to the wait registry: a hand-off wakes the waiting request from the task that read the
//! socket, with no channel or task in between. A keepalive PING finds a connection that died
//! silently. When the connection drops the inbox reconnects with backoff and wakes every local
//! waiter to re-check, since messages may have been lost meanwhile.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, Client, ProtocolVersion, PushInfo, PushKind, RedisError};

use super::inbox_line::{Forget, InboxLine};
use super::locator::Locator;
use tokio::sync::{oneshot, Notify};

use super::postman::{Postman, Unclaimed};
use crate::backend::{jitter, OutageLog};
use crate::error::LockError;
use crate::inbox_proof::InboxProof;
use crate::waiters::WaitRegistry;

const MIN_BACKOFF: Duration = Duration::from_millis(20);
const MAX_BACKOFF: Duration = Duration::from_secs(2);
/// How often an idle inbox checks that its connection still answers.
const KEEPALIVE: Duration = Duration::from_secs(5);
/// The shortest check interval while requests wait (a tiny command timeout must not make it poll).
const MIN_WAITING_KEEPALIVE: Duration = Duration::from_millis(100);

/// One live subscription: the connection, and the signal its reader gives when it drops.
pub(crate) struct Subscription {
    conn: MultiplexedConnection,
    dropped: Arc<Notify>,
    /// Cleared when the subscription is given up: its reader may still be draining the socket,
    /// and a message delivered twice (once there, once on the new subscription) would look like
    /// a grant nobody took, to be passed on from under the request that did take it.
    live: Arc<AtomicBool>,
}

impl Drop for Subscription {
    fn drop(&mut self) {
        self.live.store(false, Ordering::SeqCst);
    }
}

impl Subscription {
    /// Whether the server is a node of a Redis Cluster (`INFO cluster`: `cluster_enabled:1`).
    pub(crate) async fn in_cluster(&mut self) -> bool {
        let mut info = redis::cmd("INFO");
        info.arg("cluster");
        let info = info.query_async::<String>(&mut self.conn).await;
        info.is_ok_and(|info| info.contains("cluster_enabled:1"))
    }
}

impl std::fmt::Debug for Subscription {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Subscription").finish_non_exhaustive()
    }
}

/// The subscription of one manager.
#[derive(Clone)]
pub(crate) struct Inbox {
    /// Where each (re)connection goes.
    server: Locator,
    channel: String,
    timeout: Duration,
    /// `CLIENT SETNAME` of the connection.
    name: String,
    postman: Arc<Postman>,
    /// The server is the manager's whole backend: a PING it leaves unanswered ends every wait.
    whole: bool,
    /// The live subscription's connection, for readiness probes.
    line: InboxLine,
    /// Where an outage is logged (once for the manager).
    outages: Arc<OutageLog>,
    /// What the subscription proves, for holds that may be taken over as dead.
    proof: Arc<InboxProof>,
}

impl std::fmt::Debug for Inbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Inbox")
            .field("channel", &self.channel)
            .finish_non_exhaustive()
    }
}

impl Inbox {
    /// An inbox on `server` for `channel`, delivering to `waiters`; its connection is called
    /// `name`. `whole`: the server is the manager's only one (see [`WaitRegistry::stalled`]).
    pub(crate) fn new(
        server: Locator,
        channel: String,
        (timeout, whole): (Duration, bool),
        name: String,
        waiters: Arc<WaitRegistry>,
        (outages, proof): (Arc<OutageLog>, Arc<InboxProof>),
    ) -> Result<Self, LockError> {
        Ok(Inbox {
            server,
            channel,
            timeout,
            whole,
            name,
            postman: Arc::new(Postman {
                waiters,
                unclaimed: OnceLock::new(),
            }),
            line: InboxLine::new(timeout),
            outages,
            proof,
        })
    }

    /// The connection of this inbox's live subscription, for readiness probes.
    pub(crate) fn line(&self) -> InboxLine {
        self.line.clone()
    }

    /// A client for the server (as it is now), speaking RESP3 so that messages come as pushes.
    async fn resp3_client(&self) -> Result<Client, RedisError> {
        let info = self.server.current().await?;
        let settings = (info.redis_settings().clone()).set_protocol(ProtocolVersion::RESP3);
        Client::open(info.set_redis_settings(settings))
    }

    /// Connect, name the connection, and subscribe to this manager's channel.
    pub(crate) async fn subscribe(&self) -> Result<Subscription, RedisError> {
        let dropped = Arc::new(Notify::new());
        let live = Arc::new(AtomicBool::new(true));
        let postman = self.postman.clone();
        let (signal, delivering) = (dropped.clone(), live.clone());
        let on_push = move |push: PushInfo| -> Result<(), std::convert::Infallible> {
            match push.kind {
                PushKind::Message if delivering.load(Ordering::SeqCst) => {
                    if let Some(redis::Value::BulkString(payload)) = push.data.get(1) {
                        if let Ok(text) = std::str::from_utf8(payload) {
                            postman.deliver(text);
                        }
                    }
                }
                PushKind::Disconnection => signal.notify_one(),
                _ => {}
            }
            Ok(())
        };
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(self.timeout))
            .set_response_timeout(Some(self.timeout))
            .set_push_sender(on_push);
        let attempt = live.clone();
        let connect = async {
            let mut conn = (self.resp3_client().await?)
                .get_multiplexed_async_connection_with_config(&config)
                .await?;
            let mut name = redis::cmd("CLIENT");
            name.arg("SETNAME").arg(&self.name);
            name.exec_async(&mut conn).await?;
            let sent = Instant::now();
            conn.subscribe(&self.channel).await?;
            self.proof.subscribed(sent, Instant::now());
            self.line.set(Some(conn.clone()));
            Ok(Subscription {
                conn,
                dropped,
                live,
            })
        };
        let outcome = match tokio::time::timeout(self.timeout, connect).await {
            Ok(result) => result,
            Err(_) => Err(RedisError::from(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "timed out subscribing the lock inbox",
            ))),
        };
        match outcome {
            Ok(sub) => Ok(sub),
            Err(err) => {
                // A failed attempt may have subscribed before it failed: it delivers nothing.
                attempt.store(false, Ordering::SeqCst);
                Err(super::diagnose::explain(err, &self.server, self.timeout).await)
            }
        }
    }

    /// Keep the subscription alive until `shutdown` fires (or its sender is dropped); messages are
    /// delivered by the connection's reader meanwhile. Without a subscription yet, subscribe first
    /// (with backoff). `unclaimed` receives the messages no local waiter could take, to be passed
    /// on to another manager or waiter. `reconnected` is told after every reconnection: the
    /// server may have restarted, and the holders must learn at once what it still holds.
    pub(crate) async fn run(
        self,
        sub: Option<Subscription>,
        unclaimed: impl Fn(Unclaimed) + Send + Sync + 'static,
        reconnected: Arc<Notify>,
        mut shutdown: oneshot::Receiver<()>,
    ) {
        let _ = self.postman.unclaimed.set(Box::new(unclaimed));
        // a stopped inbox keeps no connection open through its line
        let _forget = Forget(self.line.clone());
        let waiters = self.postman.waiters.clone();
        let mut sub = match sub {
            Some(sub) => sub,
            None => {
                self.outages.lost(&self.part(), &"not subscribed at start");
                let sub = tokio::select! {
                    _ = &mut shutdown => return,
                    s = self.reconnect() => s,
                };
                // Waiters missed this server's messages until now: let them re-check.
                waiters.wake_all();
                sub
            }
        };
        let mut checked = Instant::now();
        loop {
            let lost = tokio::select! {
                _ = &mut shutdown => return,
                _ = sub.dropped.notified() => true,
                _ = tokio::time::sleep(self.waiting_keepalive()) => {
                    if !self.check_due(checked) {
                        continue;
                    }
                    checked = Instant::now();
                    !self.still_answers(&mut sub).await
                }
            };
            if !lost {
                continue;
            }
            self.proof.dropped();
            self.line.set(None);
            self.outages.lost(
                &self.part(),
                &"the inbox's connection dropped; reconnecting",
            );
            // Every waiter re-checks now: if Redis is gone they fail fast with an error instead
            // of sleeping out the holder's lease.
            waiters.wake_all();
            drop(sub);
            tokio::select! {
                _ = &mut shutdown => return,
                s = self.reconnect() => sub = s,
            }
            // Releases published while we were away reached nobody: re-check them all.
            waiters.wake_all();
            reconnected.notify_one();
        }
    }

    /// How often the inbox looks whether a check of its connection is due: every
    /// [`waiting_look`](Self::waiting_look), or every third of the takeover grace if that is
    /// shorter. A look sends nothing.
    fn waiting_keepalive(&self) -> Duration {
        let look = self.waiting_look();
        // a hold that may be taken over needs a proof within a third of the grace of its start
        let grace = self.proof.grace().map(|grace| grace / 3);
        grace.map_or(look, |every| every.min(look))
    }

    /// How often the connection is checked while requests wait: half the command timeout,
    /// within [`MIN_WAITING_KEEPALIVE`] and [`KEEPALIVE`].
    fn waiting_look(&self) -> Duration {
        (self.timeout / 2).clamp(MIN_WAITING_KEEPALIVE, KEEPALIVE)
    }

    /// Whether the connection is to be checked now, its last check made at `checked`: every
    /// [`waiting_look`](Self::waiting_look) while requests of this process wait (a frozen server
    /// then ends their waits within one and a half command timeouts, with at most one PING a
    /// second at the default), every third of the takeover grace while a hold that counts on
    /// the inbox's proofs is that old, else every [`KEEPALIVE`].
    fn check_due(&self, checked: Instant) -> bool {
        let (elapsed, waiting) = (checked.elapsed(), self.postman.waiters.len() > 0);
        let proof_due = (self.proof.due_every(Instant::now())).is_some_and(|e| elapsed >= e);
        (waiting && elapsed >= self.waiting_look()) || proof_due || elapsed >= KEEPALIVE
    }

    /// Whether the connection still answers a check ([`answers`](Self::answers)). One left
    /// unanswered for the command timeout (a frozen server) ends every wait when the server is the
    /// manager's whole backend: no wake-up can come, nor an answer to a waiter's next attempt.
    async fn still_answers(&self, sub: &mut Subscription) -> bool {
        match self.answers(sub).await {
            Some(answered) => answered,
            None => {
                if self.whole {
                    self.postman.waiters.stalled();
                }
                false
            }
        }
    }

    /// Whether the connection answers a PING, `None` when it is not answered within the command
    /// timeout (a frozen server). Under Sentinel it must also still be on the master (`ROLE`): a
    /// failover that demoted this server leaves the connection open, but releases are published
    /// on the new master now.
    async fn answers(&self, sub: &mut Subscription) -> Option<bool> {
        let sentinel = matches!(self.server, Locator::Sentinel(_));
        let cmd = redis::cmd(if sentinel { "ROLE" } else { "PING" });
        let sent = Instant::now();
        let ping = cmd.query_async::<redis::Value>(&mut sub.conn);
        match tokio::time::timeout(self.timeout, ping).await {
            Ok(Ok(reply)) if !sentinel || is_master(&reply) => {
                self.proof.answered(sent);
                Some(true)
            }
            Ok(Ok(_)) => Some(false),
            // the connection's own response timeout may end the PING first
            Ok(Err(err)) if err.is_timeout() => None,
            Ok(Err(_)) => Some(false),
            Err(_) => None,
        }
    }

    /// This inbox, as the outage log names it.
    fn part(&self) -> String {
        format!("inbox of {}", self.server.describe())
    }

    async fn reconnect(&self) -> Subscription {
        let mut backoff = MIN_BACKOFF;
        loop {
            // up to 50% more, so that many managers do not reconnect in lockstep
            tokio::time::sleep(backoff + jitter(backoff / 2)).await;
            match self.subscribe().await {
                Ok(sub) => {
                    tracing::debug!(channel = %self.channel, "lock inbox reconnected");
                    self.outages.back(&self.part());
                    crate::telemetry::inbox_reconnected();
                    return sub;
                }
                Err(err) => {
                    self.outages.retry_failed(&self.part(), &err);
                    backoff = next_backoff(backoff, &err);
                }
            }
        }
    }
}

/// The pause before the next attempt to subscribe, after one that failed with `err`: twice the
/// last, up to [`MAX_BACKOFF`], after a refusal; the least after a timeout. A server that took the
/// connection and did not answer (a frozen one) answers the attempt in flight once it resumes, or
/// the next one: a pause that grew through the freeze would keep waiters without their wake-ups
/// for seconds after it, and the attempt itself has waited the command timeout already.
fn next_backoff(backoff: Duration, err: &RedisError) -> Duration {
    if err.is_timeout() {
        return MIN_BACKOFF;
    }
    (backoff * 2).min(MAX_BACKOFF)
}

/// Whether a `ROLE` reply says master.
fn is_master(reply: &redis::Value) -> bool {
    let redis::Value::Array(fields) = reply else {
        return false;
    };
    match fields.first() {
        Some(redis::Value::BulkString(role)) => role == b"master",
        Some(redis::Value::SimpleString(role)) => role == "master",
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::{is_master, next_backoff, MAX_BACKOFF, MIN_BACKOFF};
    use redis::{RedisError, Value};
    use std::io;
    use std::time::Duration;

    #[test]
    fn a_timed_out_attempt_does_not_grow_the_backoff() {
        let timed_out: RedisError = io::Error::new(io::ErrorKind::TimedOut, "frozen").into();
        let refused: RedisError = io::Error::from(io::ErrorKind::ConnectionRefused).into();
        assert_eq!(next_backoff(MAX_BACKOFF, &timed_out), MIN_BACKOFF);
        assert_eq!(next_backoff(MIN_BACKOFF, &refused), MIN_BACKOFF * 2);
        assert_eq!(next_backoff(Duration::from_secs(60), &refused), MAX_BACKOFF);
    }

    #[test]
    fn role_replies_tell_a_master_from_a_replica() {
        let role = |name: &str| Value::Array(vec![Value::BulkString(name.into()), Value::Int(0)]);
        assert!(is_master(&role("master")));
        assert!(!is_master(&role("slave")));
        assert!(!is_master(&Value::SimpleString("PONG".into())));
    }
}
