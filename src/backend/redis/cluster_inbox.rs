//! The inbox of a manager on a Redis Cluster: sharded pub/sub (`SSUBSCRIBE`), one connection per
//! shard master that owns a slot this manager waits in, all through one redis-rs cluster
//! connection speaking RESP3. A channel is subscribed the first time a request of this manager may
//! wait for a lock of its slot, before the attempt that records it as waiting, so no message for
//! it can be published before the subscription. redis-rs resubscribes after a disconnection or a
//! failover; when a slot moves to another master, the old one unsubscribes its channels
//! (`SUNSUBSCRIBE` pushes) and the inbox subscribes again, at the new owner. When the connection
//! to a shard node drops (its master died), redis-rs learns the new owner of the slots only when a
//! command fails there, and no command of the inbox would: so the inbox subscribes every slot
//! again, until each reaches a live owner (a promoted replica). Each resubscription wakes every
//! local waiter to re-check, once it is in place, since messages may have been lost meanwhile.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;

use futures_util::future::join_all;
use redis::cluster::ClusterClientBuilder;
use redis::cluster_async::ClusterConnection;
use redis::{ConnectionInfo, ProtocolVersion, PushInfo, PushKind, RedisError};
use tokio::sync::{mpsc, Notify, OnceCell};

use super::channels::Channels;
use super::cluster_proof::{prove_slots, SlotProofs};
use super::postman::{Postman, Unclaimed};
use super::slots::slot;
use crate::error::BoxError;
use crate::inbox_proof::InboxProof;
use crate::waiters::WaitRegistry;

/// The sharded subscriptions of one manager.
pub(crate) struct ClusterInbox {
    conn: ClusterConnection,
    manager_id: Arc<str>,
    channels: Arc<Channels>,
    /// The slots subscribed (or being subscribed) so far.
    slots: Mutex<HashMap<u16, Arc<OnceCell<()>>>>,
    postman: Arc<Postman>,
    /// Cleared once the manager stops: nothing is delivered any more.
    open: Arc<AtomicBool>,
    reconnected: Arc<Notify>,
    /// The channels confirmed so far (see [`Pushes`]).
    confirmed: Arc<Mutex<HashSet<Vec<u8>>>>,
    /// What each slot's channel proves, for holds that may be taken over as dead.
    proofs: Arc<SlotProofs>,
}

impl std::fmt::Debug for ClusterInbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterInbox")
            .field("manager_id", &self.manager_id)
            .finish_non_exhaustive()
    }
}

/// What the pushes of the inbox connection feed: the postman, and the signals of a resubscription.
struct Pushes {
    postman: Arc<Postman>,
    open: Arc<AtomicBool>,
    /// Channels confirmed once: a second confirmation is a resubscription.
    confirmed: Arc<Mutex<HashSet<Vec<u8>>>>,
    reconnected: Arc<Notify>,
    /// The slots whose channel a master dropped (the slot moved away from it); `None` when a
    /// node's connection dropped, and with it the channels of every slot it served.
    dropped: mpsc::UnboundedSender<Option<u16>>,
    proofs: Arc<SlotProofs>,
}

impl Pushes {
    fn on_push(&self, push: PushInfo) {
        if !self.open.load(Ordering::SeqCst) {
            return;
        }
        match push.kind {
            PushKind::SMessage => {
                if let Some(redis::Value::BulkString(payload)) = push.data.get(1) {
                    if let Ok(text) = std::str::from_utf8(payload) {
                        if !self.proofs.echoed(text) {
                            self.postman.deliver(text);
                        }
                    }
                }
            }
            PushKind::SSubscribe => {
                let Some(redis::Value::BulkString(channel)) = push.data.first() else {
                    return;
                };
                if let Ok(name) = std::str::from_utf8(channel) {
                    self.proofs.confirmed(slot(name));
                }
                let first = (self.confirmed.lock())
                    .map_or(true, |mut confirmed| confirmed.insert(channel.clone()));
                if !first {
                    self.resubscribed();
                }
            }
            PushKind::SUnsubscribe => {
                // not asked for (the inbox is open): the master no longer owns the slot
                if let Some(redis::Value::BulkString(channel)) = push.data.first() {
                    if let Ok(channel) = std::str::from_utf8(channel) {
                        self.proofs.dropped(Some(slot(channel)));
                        let _ = self.dropped.send(Some(slot(channel)));
                    }
                }
            }
            PushKind::Disconnection => {
                self.proofs.dropped(None);
                self.postman.waiters.wake_all();
                let _ = self.dropped.send(None);
            }
            _ => {}
        }
    }

    fn resubscribed(&self) {
        tracing::info!("lock inbox resubscribed on the cluster");
        crate::telemetry::inbox_reconnected();
        self.postman.waiters.wake_all();
        self.reconnected.notify_one();
    }
}

impl ClusterInbox {
    /// Connect to the cluster of `seeds` for sharded pub/sub, delivering to `waiters`; each
    /// slot's channel proves itself under `proof`'s grace.
    pub(crate) async fn connect(
        seeds: Vec<ConnectionInfo>,
        timeout: Duration,
        manager_id: Arc<str>,
        channels: Arc<Channels>,
        (waiters, reconnected): (Arc<WaitRegistry>, Arc<Notify>),
        proof: Arc<InboxProof>,
    ) -> Result<Arc<Self>, RedisError> {
        let (dropped, moved) = mpsc::unbounded_channel();
        let postman = Arc::new(Postman {
            waiters,
            unclaimed: OnceLock::new(),
        });
        let open = Arc::new(AtomicBool::new(true));
        let confirmed = Arc::new(Mutex::default());
        let proofs = Arc::new(SlotProofs::new(proof));
        let pushes = Pushes {
            postman: postman.clone(),
            open: open.clone(),
            confirmed: confirmed.clone(),
            reconnected: reconnected.clone(),
            dropped,
            proofs: proofs.clone(),
        };
        let on_push = move |push: PushInfo| -> Result<(), std::convert::Infallible> {
            pushes.on_push(push);
            Ok(())
        };
        // A dropped node connection comes back within tens of milliseconds (redis-rs's default
        // waits a second or more between tries): a holder's slots must be subscribed again
        // within the takeover grace.
        let client = ClusterClientBuilder::new(seeds)
            .use_protocol(ProtocolVersion::RESP3)
            .connection_timeout(timeout)
            .response_timeout(timeout)
            .min_retry_wait(5)
            .max_retry_wait(50)
            .push_sender(on_push)
            .build()?;
        let conn = client.get_async_connection().await?;
        let inbox = Arc::new(ClusterInbox {
            conn,
            manager_id,
            channels,
            slots: Mutex::default(),
            postman,
            open,
            reconnected,
            confirmed,
            proofs: proofs.clone(),
        });
        tokio::spawn(follow_moved_slots(Arc::downgrade(&inbox), moved));
        if proofs.on() {
            tokio::spawn(prove_slots(Arc::downgrade(&inbox), proofs));
        }
        Ok(inbox)
    }

    /// Subscribe again to the channels of `slots` (every slot listened to, for `None`), each at
    /// the slot's owner now, retrying until it works or the inbox closes; then every waiter
    /// re-checks, once: a wake-up published before the subscription was in place is lost.
    async fn resubscribe(&self, slots: Option<Vec<u16>>) {
        let slots = slots.unwrap_or_else(|| {
            let slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
            slots.keys().copied().collect()
        });
        if slots.is_empty() {
            return;
        }
        join_all(slots.iter().map(|&slot| self.resubscribe_slot(slot))).await;
        if !self.open.load(Ordering::SeqCst) {
            return;
        }
        tracing::info!(
            slots = slots.len(),
            "lock inbox resubscribed after a failover"
        );
        crate::telemetry::inbox_reconnected();
        self.postman.waiters.wake_all();
        self.reconnected.notify_one();
    }

    /// Subscribe again to the channel of `slot`, retrying until it works or the inbox closes.
    async fn resubscribe_slot(&self, slot: u16) {
        let channel = self.channels.of_slot(slot, &self.manager_id);
        let mut backoff = Duration::from_millis(20);
        loop {
            (self.slots.lock().unwrap_or_else(|p| p.into_inner())).remove(&slot);
            // its confirmation is this resubscription's, which wakes the waiters itself
            (self.confirmed.lock().unwrap_or_else(|p| p.into_inner())).remove(channel.as_bytes());
            if !self.open.load(Ordering::SeqCst) {
                return;
            }
            match self.listen(slot).await {
                Ok(()) => return,
                Err(err) => {
                    tracing::warn!(slot, error = %err, "could not resubscribe a slot");
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_secs(2));
                }
            }
        }
    }

    /// Where the messages no local waiter takes go (set once, when the backend exists).
    pub(crate) fn pass_unclaimed_to(&self, unclaimed: impl Fn(Unclaimed) + Send + Sync + 'static) {
        let _ = self.postman.unclaimed.set(Box::new(unclaimed));
    }

    /// Subscribe to this manager's channel of `slot`, once.
    pub(crate) async fn listen(&self, slot: u16) -> Result<(), BoxError> {
        let cell = {
            let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
            slots.entry(slot).or_default().clone()
        };
        cell.get_or_try_init(|| async {
            let channel = self.channels.of_slot(slot, &self.manager_id);
            let mut conn = self.conn.clone();
            conn.ssubscribe(&channel).await
        })
        .await?;
        Ok(())
    }

    /// Whether holds of this manager may be taken over: then a hold's slot is subscribed before
    /// the hold is taken, for other managers to see this manager alive there.
    pub(crate) fn proves(&self) -> bool {
        self.proofs.on()
    }

    /// The proofs the holds of `slot` count on.
    pub(crate) fn proof_of(&self, slot: u16) -> Arc<InboxProof> {
        self.proofs.of(slot)
    }

    /// Whether the inbox still delivers (the manager has not stopped).
    pub(super) fn is_open(&self) -> bool {
        self.open.load(Ordering::SeqCst)
    }

    /// Publish `payload` to this manager's own channel of `slot` (an echo proving the channel).
    pub(super) async fn publish_to_self(&self, slot: u16, payload: String) {
        let channel = self.channels.of_slot(slot, &self.manager_id);
        let mut publish = redis::cmd("SPUBLISH");
        publish.arg(&channel).arg(payload);
        let mut conn = self.conn.clone();
        if let Err(err) = publish.query_async::<i64>(&mut conn).await {
            tracing::debug!(slot, error = %err, "an inbox echo was not sent");
        }
    }

    /// Stop delivering messages and leave every channel.
    pub(crate) async fn close(&self) {
        self.open.store(false, Ordering::SeqCst);
        let slots: Vec<u16> = {
            let slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
            slots.keys().copied().collect()
        };
        let mut conn = self.conn.clone();
        for slot in slots {
            let channel = self.channels.of_slot(slot, &self.manager_id);
            let _ = conn.sunsubscribe(&channel).await;
        }
    }
}

/// Resubscribe each slot whose channel a master dropped, or every slot when a node's connection
/// dropped, while the inbox lives. Requests that queued up meanwhile are served together.
async fn follow_moved_slots(
    inbox: Weak<ClusterInbox>,
    mut moved: mpsc::UnboundedReceiver<Option<u16>>,
) {
    while let Some(first) = moved.recv().await {
        let mut slots = first.map(|slot| vec![slot]);
        while let Ok(more) = moved.try_recv() {
            match (&mut slots, more) {
                (Some(slots), Some(slot)) => slots.push(slot),
                (_, _) => slots = None,
            }
        }
        if let Some(slots) = slots.as_mut() {
            slots.sort_unstable();
            slots.dedup();
        }
        let Some(inbox) = inbox.upgrade() else {
            return;
        };
        inbox.resubscribe(slots).await;
    }
}

impl ClusterInbox {
    /// Whether every master answers a PING on the inbox's connection now (readiness).
    pub(crate) async fn ping_masters(&self) -> Result<(), redis::RedisError> {
        super::ping::ping_masters(self.conn.clone()).await
    }
}
