//! Connecting a quorum manager to its masters: per master a command pool (commands bounded by the
//! node timeout) and an inbox, which proves itself in proofs of its own; one wait registry and
//! one background task for all.

use std::sync::Arc;
use std::time::Duration;

use futures_util::future::join_all;
use redis::ConnectionInfo;

use super::round::majority;
use super::{Node, QuorumBackend};
use crate::backend::redis::{open_server, spawn_inbox, KeySpace, Server, Settings, Subscription};
use crate::backend::{InboxStop, Wiring};
use crate::error::LockError;
use crate::inbox_proof::InboxProof;

/// The quorum backend over the masters of `infos`, with their inboxes running. Connects when a
/// majority of the masters can be subscribed; the inboxes of the others keep trying in the
/// background.
pub(crate) async fn connect(
    infos: &[ConnectionInfo],
    node_timeout: Duration,
    settings: &Settings,
    wiring: &Wiring,
) -> Result<(Arc<QuorumBackend>, InboxStop), LockError> {
    // each master's inbox proves itself on its own: a proof of one is none of another's
    let proofs: Vec<Arc<InboxProof>> = (infos.iter())
        .map(|_| Arc::new(wiring.inbox_proof.same_grace()))
        .collect();
    let servers = (infos.iter().zip(&proofs))
        .map(|(info, proof)| {
            let own = Wiring {
                inbox_proof: proof.clone(),
                ..wiring.clone()
            };
            open_server(
                info.clone().into(),
                None,
                node_timeout,
                settings,
                &own,
                false,
            )
        })
        .collect::<Result<Vec<Server>, _>>()?;
    let subscriptions = join_all(servers.iter().map(|s| s.inbox.subscribe())).await;
    // each error names its master
    let subscriptions: Vec<_> = (subscriptions.into_iter())
        .map(|s| s.map_err(|err| err.to_string()))
        .collect();
    require_majority(&subscriptions)?;
    let mut subscriptions = subscriptions;
    refuse_cluster_nodes(&servers, &mut subscriptions).await?;
    let nodes = (servers.iter())
        .map(|s| Node::new(s.backend.clone(), s.name.clone()))
        .collect();
    let quorum = QuorumBackend::new(
        nodes,
        proofs,
        wiring.manager_id.clone(),
        KeySpace::new(&settings.namespace).inbox_prefix(),
        wiring.waiters.clone(),
        node_timeout,
        wiring.background.clone(),
    );
    // ready when a lock can be taken: a majority of the masters answer
    wiring.ready.majority_suffices();
    let mut stop = InboxStop::default();
    for (server, subscription) in servers.into_iter().zip(subscriptions) {
        spawn_inbox(server, subscription.ok(), wiring, stop.add());
    }
    Ok((Arc::new(quorum), stop))
}

/// Fails when a master is a Redis Cluster node: a quorum's masters must be independent, and a
/// cluster's nodes would answer most keys with `MOVED`.
async fn refuse_cluster_nodes(
    servers: &[Server],
    subscriptions: &mut [Result<Subscription, String>],
) -> Result<(), LockError> {
    for (server, subscription) in servers.iter().zip(subscriptions) {
        if let Ok(subscription) = subscription {
            if subscription.in_cluster().await {
                return Err(LockError::Config(format!(
                    "Redis master {} is a Redis Cluster node: quorum (RedLock) locks need \
                     independent masters; use LockManager::cluster for a cluster",
                    server.name
                )));
            }
        }
    }
    Ok(())
}

/// Fails unless a majority of the masters could be subscribed, naming why each other one could not.
fn require_majority(subscriptions: &[Result<Subscription, String>]) -> Result<(), LockError> {
    let (all, needed) = (subscriptions.len(), majority(subscriptions.len()));
    let up = subscriptions.iter().filter(|s| s.is_ok()).count();
    if up >= needed {
        return Ok(());
    }
    let causes: Vec<&str> = (subscriptions.iter())
        .filter_map(|s| s.as_ref().err().map(String::as_str))
        .collect();
    let cause = format!(
        "only {up} of {all} Redis masters reachable; a quorum needs {needed}: {}",
        causes.join("; ")
    );
    Err(LockError::unavailable("", cause))
}
