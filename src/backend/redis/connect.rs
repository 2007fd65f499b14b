//! Connecting a manager to one Redis server: its command pool, its inbox (the one pub/sub
//! connection), and the rule for the messages that no local waiter takes.

use std::sync::Arc;
use std::time::Duration;

use super::locator::Locator;
use super::{
    CommandPool, Connector, Inbox, KeySpace, RedisBackend, RedisPool, Subscription, Unclaimed,
};
use crate::backend::{shared_kind, InboxStop, ServerCheck, Wiring};
use crate::error::LockError;
use crate::waiters::Departure;

/// How a manager uses its Redis servers.
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    /// The prefix of every key.
    pub(crate) namespace: String,
    /// Bounds each command, and the inbox's connection and PINGs.
    pub(crate) command_timeout: Duration,
    /// The fair eviction deadline (and a grant's claim lease).
    pub(crate) eviction: Duration,
    /// Connections in each command pool of our own.
    pub(crate) pool_size: u32,
}

/// One Redis server of a manager, before its inbox runs.
pub(crate) struct Server {
    pub(crate) backend: Arc<RedisBackend>,
    pub(crate) inbox: Inbox,
    /// `host:port`, for errors.
    pub(crate) name: String,
}

/// The manager's backend on the server of `info`, subscribed, with its inbox running. Commands go
/// through `user_pool` when one is given. Fails when the inbox cannot subscribe.
pub(crate) async fn connect(
    server: Locator,
    user_pool: Option<RedisPool>,
    settings: &Settings,
    wiring: &Wiring,
) -> Result<(Arc<RedisBackend>, InboxStop), LockError> {
    let server = open_server(
        server,
        user_pool,
        settings.command_timeout,
        settings,
        wiring,
        true,
    )?;
    let subscription =
        (server.inbox.subscribe().await).map_err(|err| LockError::unavailable("", err))?;
    server.backend.open_connections().await;
    let mut stop = InboxStop::default();
    let backend = server.backend.clone();
    spawn_inbox(server, Some(subscription), wiring, stop.add());
    Ok((backend, stop))
}

/// The server of `info`, not yet subscribed: a backend whose commands are bounded by `timeout`,
/// through `user_pool` or a pool of our own, and its inbox. `whole`: it is the manager's only
/// server, whose stall ends every wait.
pub(crate) fn open_server(
    server: Locator,
    user_pool: Option<RedisPool>,
    timeout: Duration,
    settings: &Settings,
    wiring: &Wiring,
    whole: bool,
) -> Result<Server, LockError> {
    let name = connection_name(&wiring.manager_id);
    let pool = match user_pool {
        Some(pool) => CommandPool::user(pool),
        None => {
            let connector = Connector::new(server.clone(), timeout, name.clone());
            CommandPool::own(connector, settings.pool_size, timeout)
        }
    };
    let keys = KeySpace::new(&settings.namespace);
    let channel = keys.inbox(&wiring.manager_id);
    let described = server.describe();
    let inbox = Inbox::new(
        server,
        channel,
        (settings.command_timeout, whole),
        name,
        wiring.waiters.clone(),
        (wiring.outages.clone(), wiring.inbox_proof.clone()),
    )?;
    let id = wiring.manager_id.clone();
    let waiters = wiring.waiters.clone();
    let backend = RedisBackend::new(pool, keys, id, timeout, settings.eviction, waiters, whole);
    Ok(Server {
        backend: Arc::new(backend),
        inbox,
        name: described,
    })
}

/// The `CLIENT SETNAME` of every connection the manager opens: `CLIENT LIST` tells whose it is.
fn connection_name(manager_id: &str) -> String {
    format!("tower-lock:{manager_id}")
}

/// Run the inbox of `server` (subscribing first, with backoff, if `subscription` is `None`) until
/// `stopped` fires.
pub(crate) fn spawn_inbox(
    server: Server,
    subscription: Option<Subscription>,
    wiring: &Wiring,
    stopped: tokio::sync::oneshot::Receiver<()>,
) {
    wiring.ready.add(ServerCheck {
        name: server.name.clone(),
        backend: server.backend.clone(),
        inbox: Some(server.inbox.line()),
    });
    let unclaimed = pass_on(server.backend, wiring);
    let reconnected = wiring.reconnected.clone();
    tokio::spawn(
        server
            .inbox
            .run(subscription, unclaimed, reconnected, stopped),
    );
}

/// What to do with a message that no local waiter takes: pass it on through the server it came
/// from. A wake-up goes to the next waiting manager, a grant to the next queued waiter.
pub(super) fn pass_on(
    node: Arc<RedisBackend>,
    wiring: &Wiring,
) -> impl Fn(Unclaimed) + Send + Sync + 'static {
    let (waiters, background) = (wiring.waiters.clone(), wiring.background.clone());
    move |message: Unclaimed| {
        let (node, waiters) = (node.clone(), waiters.clone());
        background.finish(async move {
            let outcome = match message {
                Unclaimed::Wake(lock) => {
                    let departure = Departure {
                        last: true,
                        pass_on: true,
                    };
                    let outcome = node.abandon(&lock, departure).await;
                    // a request that began to wait meanwhile may have lost its record: it checks
                    waiters.wake_one(&lock);
                    outcome
                }
                Unclaimed::Grant { lock, waiter } if shared_kind(&waiter).is_some() => {
                    node.shared_leave_queue(&lock, &waiter).await
                }
                Unclaimed::Grant { lock, waiter } => node.leave_queue(&lock, &waiter).await,
            };
            if let Err(err) = outcome {
                tracing::debug!(error = %err, "could not pass an unclaimed message on");
            }
        });
    }
}
