//! `release --force`: the tool ends the hold, the old guard learns it, and the lock goes on to
//! the request first in line, then the direct waiter.

use std::time::Duration;

use serde_json::Value;

use crate::on_redis_and_cluster;
use crate::run::{args, tower_lock, tower_lock_ok};
use crate::scene::{state_when, Scene, KEY};
use crate::support::fixture::Fixture;
use crate::support::GENEROUS;

/// The holder's lease: its watchdog renews every 200 ms, and learns then that it lost the lock.
const SHORT_LEASE: Duration = Duration::from_millis(600);

on_redis_and_cluster!(
    release_force_yes_hands_the_lock_to_the_next_waiter,
    release_of_a_free_lock_releases_nothing,
);

async fn release_force_yes_hands_the_lock_to_the_next_waiter(fx: Fixture) {
    let scene = Scene::contended(&fx, SHORT_LEASE).await;
    let out = tower_lock_ok(&args(&fx, &["release", KEY, "--force", "--yes"])).await;
    assert!(out.contains(&format!("released {KEY}")), "{out}");
    assert!(
        out.contains(scene.holder.id()),
        "it names the hold it ended: {out}"
    );

    tokio::time::timeout(SHORT_LEASE + Duration::from_secs(2), scene.guard.lost())
        .await
        .expect("the old holder learns it lost the lock");
    let started = scene.handler_started.clone();
    let _running = tokio::time::timeout(GENEROUS, started.acquire())
        .await
        .expect("the request first in line gets the lock");
    let state = state_when(&scene.holder, KEY, |s| s.holders.len() == 1).await;
    assert_eq!(state.holders.len(), 1, "{state:?}");
    assert_eq!(state.holders[0].manager, scene.layer.id(), "{state:?}");
    if let Some(token) = state.holders[0].token {
        assert!(token > scene.guard.fencing_token(), "{state:?}");
    }

    let out = tower_lock_ok(&args(&fx, &["show", KEY, "--json"])).await;
    let shown: Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(
        shown["holders"][0]["manager"],
        scene.layer.id(),
        "{shown:#}"
    );
    let waiters = shown["waiters"].as_array().expect("waiters");
    assert_eq!(waiters.len(), 1, "{shown:#}");
    assert_eq!(waiters[0]["manager"], scene.direct.id());
    scene.finish().await;
}

async fn release_of_a_free_lock_releases_nothing(fx: Fixture) {
    let out = tower_lock_ok(&args(
        &fx,
        &["release", "accounts/free", "--force", "--yes"],
    ))
    .await;
    assert!(
        out.contains("accounts/free is free: nothing to release"),
        "{out}"
    );

    // without --force nothing happens, whatever the lock's state
    let held = fx.manager().await;
    let guard = held
        .acquire("accounts/held", &tower_lock::LockOptions::exclusive())
        .await
        .expect("hold");
    let ran = tower_lock(&args(&fx, &["release", "accounts/held", "--yes"])).await;
    assert_eq!(ran.code, Some(2), "{ran:?}");
    assert!(ran.stderr.contains("--force"), "{ran:?}");
    let state = held.inspect("accounts/held").await.expect("inspect");
    assert_eq!(state.holders.len(), 1, "still held: {state:?}");
    assert!(!guard.is_lost());
    guard.release().await.expect("release");
}
