//! How one call reaches Redis: a connection for its lock, the call bounded by the command
//! timeout, and once more on a fresh connection when the first one refused it unsent (the server
//! had closed it) or, for a call that may run twice, lost it.

use std::future::Future;
use std::task::Poll;
use std::time::Duration;

use redis::FromRedisValue;

use super::call::{RoundTrip, ScriptCall};
use super::pool::{BrokenFlag, Channel};
use super::{link, RedisBackend};
use crate::error::BoxError;

/// Whether `err` says the connection itself was lost (not a slow or refusing server): another
/// connection may well succeed.
fn connection_died(err: &BoxError) -> bool {
    err.downcast_ref::<redis::RedisError>()
        .is_some_and(|err| err.is_io_error() || err.is_connection_dropped())
}

/// Why a call failed: its connection refused it unsent, or anything else.
enum Refused {
    NotSent(redis::RedisError),
    Failed(BoxError),
}

impl Refused {
    fn into_error(self) -> BoxError {
        match self {
            Refused::NotSent(err) => err.into(),
            Refused::Failed(err) => err,
        }
    }
}

impl RedisBackend {
    /// Run one script call: getting a connection and the call are each bounded by the command
    /// timeout.
    /// `hint` picks the connection: the same lock always uses the same one, so a command of this
    /// process sent after another one's reply reaches Redis after it.
    pub(super) async fn invoke<T: FromRedisValue>(
        &self,
        hint: u64,
        call: &impl RoundTrip,
    ) -> Result<T, BoxError> {
        self.invoke_within(hint, call, self.timeout).await
    }

    /// Run one script call; past the command timeout, mark its connection broken (later commands
    /// take a fresh one) but keep listening for the reply until `patience` has passed.
    pub(super) async fn invoke_within<T: FromRedisValue>(
        &self,
        hint: u64,
        call: &impl RoundTrip,
        patience: Duration,
    ) -> Result<T, BoxError> {
        let started = std::time::Instant::now();
        let outcome = self.call_within(hint, call, patience).await;
        crate::telemetry::redis_call(outcome.is_ok(), started.elapsed());
        outcome
    }

    /// [`Self::invoke_within`] without its latency record. A call that its connection refused
    /// unsent (it had failed: the server restarted, say) goes once more on a fresh one: whatever
    /// it does, the server never saw it.
    async fn call_within<T: FromRedisValue>(
        &self,
        hint: u64,
        call: &impl RoundTrip,
        patience: Duration,
    ) -> Result<T, BoxError> {
        let (conn, broken) = self.connection(hint).await?;
        match self.call_on(conn, &broken, call, patience).await {
            Err(Refused::NotSent(err)) => {
                broken.check(&err);
                let (conn, broken) = self.connection(hint).await?;
                self.call_on(conn, &broken, call, patience).await
            }
            outcome => outcome,
        }
        .map_err(Refused::into_error)
    }

    /// The connection for the lock that hashes to `hint`. Getting it is bounded by the command
    /// timeout too (a user's bb8 pool may wait 30 s for one by default; ours opens one within
    /// it). It has a timeout of its own: a fresh connection loads the scripts first, which must
    /// not eat into the command's time. The usual connection, open already, is there at the
    /// first poll, with no timer.
    async fn connection(&self, hint: u64) -> Result<(Channel, BrokenFlag), BoxError> {
        let conn = self.pool.conn(hint);
        tokio::pin!(conn);
        let first = std::future::poll_fn(|cx| Poll::Ready(conn.as_mut().poll(cx))).await;
        match first {
            Poll::Ready(found) => found,
            Poll::Pending => {
                tokio::time::timeout(self.timeout, conn)
                    .await
                    .map_err(|_| -> BoxError {
                        self.stalled();
                        format!("no Redis connection within {:?}", self.timeout).into()
                    })?
            }
        }
    }

    /// Run `call` on `conn`; past the command timeout, mark the connection broken (later
    /// commands take a fresh one) but keep listening for the reply until `patience` has passed.
    async fn call_on<T: FromRedisValue>(
        &self,
        mut conn: Channel,
        broken: &BrokenFlag,
        call: &impl RoundTrip,
        patience: Duration,
    ) -> Result<T, Refused> {
        let too_slow =
            || -> BoxError { format!("Redis did not answer within {:?}", self.timeout).into() };
        let reply = call.run::<T>(&mut conn);
        tokio::pin!(reply);
        let outcome = match tokio::time::timeout(self.timeout, &mut reply).await {
            Ok(outcome) => outcome,
            Err(_) => {
                broken.timed_out();
                self.stalled();
                let rest = patience.saturating_sub(self.timeout);
                match tokio::time::timeout(rest, reply).await {
                    Ok(outcome) => outcome,
                    Err(_) => return Err(Refused::Failed(too_slow())),
                }
            }
        };
        outcome.map_err(|err| {
            if link::was_not_sent(&err) {
                return Refused::NotSent(err);
            }
            broken.check(&err);
            Refused::Failed(err.into())
        })
    }

    /// Run a call that may run twice (a renewal, a heartbeat): when it fails on a connection that
    /// died (the server restarted, or killed it), once more on a fresh one. The watchdog must
    /// learn at once what a restarted server still holds, not a renewal period later.
    pub(super) async fn invoke_idempotent<T: FromRedisValue>(
        &self,
        hint: u64,
        call: &ScriptCall,
    ) -> Result<T, BoxError> {
        match self.invoke(hint, call).await {
            Err(err) if connection_died(&err) => self.invoke(hint, call).await,
            outcome => outcome,
        }
    }

    /// The server left a command unanswered for the command timeout: when it is the manager's
    /// whole backend, every local waiter ends its wait (see [`WaitRegistry::stalled`]).
    ///
    /// [`WaitRegistry::stalled`]: crate::waiters::WaitRegistry::stalled
    pub(super) fn stalled(&self) {
        if self.whole {
            self.waiters.stalled();
        }
    }
}
