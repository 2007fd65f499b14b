//! `show` and `list`: what the tool prints of a contended lock, as text and as JSON, matches the
//! holder and the queue the managers of this process keep.

use serde_json::Value;
use tower_lock::{HolderState, LockManager, LockOptions, DEFAULT_LEASE};

use crate::on_redis_and_cluster;
use crate::run::{args, tower_lock, tower_lock_ok};
use crate::scene::{Scene, KEY};
use crate::support::fixture::Fixture;
use crate::support::GENEROUS;

on_redis_and_cluster!(
    show_json_gives_the_holder_and_the_waiters_in_order,
    show_as_text_lists_the_holder_then_the_queue,
    a_free_lock_is_shown_free,
    list_shows_the_used_locks_under_a_prefix,
);

/// The name the tool's table gives a holder: its label, else the start of its manager id.
pub fn table_name(label: Option<&str>, manager: &str) -> String {
    label.map_or_else(|| manager.chars().take(12).collect(), str::to_owned)
}

fn millis(value: &Value) -> Option<u128> {
    value.as_u64().map(u128::from)
}

async fn show_json_gives_the_holder_and_the_waiters_in_order(fx: Fixture) {
    let scene = Scene::contended(&fx, DEFAULT_LEASE).await;
    let out = tower_lock_ok(&args(&fx, &["show", KEY, "--json"])).await;
    let elapsed = scene.held_since.elapsed();
    let state: Value = serde_json::from_str(&out).expect("one JSON document");
    assert_eq!(state["key"], KEY);
    assert_eq!(state["free"], false);
    assert_eq!(state["family"], "fair", "{state:#}");
    assert_eq!(state["permits"], Value::Null);
    let holders = state["holders"].as_array().expect("holders");
    assert_eq!(holders.len(), 1, "{state:#}");
    let holder = &holders[0];
    assert_eq!(holder["manager"], scene.holder.id());
    let owner = holder["owner"].as_str().expect("owner");
    assert!(
        owner.starts_with(&format!("{}:", scene.holder.id())),
        "{owner}"
    );
    assert_eq!(holder["mode"], "fair");
    assert_eq!(holder["count"], 1);
    // a hold taken on the fast path shows no token: only its holder knows it
    if !holder["token"].is_null() {
        assert_eq!(holder["token"], scene.guard.fencing_token());
    }
    let lease_left = millis(&holder["lease_left_ms"]).expect("a watchdog lease has an expiry");
    assert!(
        lease_left > 0 && lease_left <= DEFAULT_LEASE.as_millis() * 11 / 10,
        "{lease_left}"
    );
    if let Some(held_for) = millis(&holder["held_for_ms"]) {
        assert!(
            held_for <= elapsed.as_millis() + 1_000,
            "{held_for} ms, {elapsed:?}"
        );
    }
    assert_eq!(
        holder["request"],
        Value::Null,
        "a direct hold has no request"
    );
    assert!(
        holder["label"].is_null() || holder["label"].is_string(),
        "{holder}"
    );

    let waiters = state["waiters"].as_array().expect("waiters");
    let managers: Vec<&Value> = waiters.iter().map(|w| &w["manager"]).collect();
    assert_eq!(managers, [scene.layer.id(), scene.direct.id()], "{state:#}");
    for (i, waiter) in waiters.iter().enumerate() {
        assert_eq!(waiter["position"], i + 1);
        assert_eq!(waiter["mode"], "fair");
        assert!(waiter["waiter"].is_string(), "{waiter}");
    }
    let waited: Vec<Option<u128>> = waiters.iter().map(|w| millis(&w["waited_ms"])).collect();
    if let [Some(first), Some(second)] = waited[..] {
        assert!(
            first >= second && first < GENEROUS.as_millis(),
            "{waited:?}"
        );
    }
    if let Some(last) = state["last_token"].as_u64() {
        assert!(
            holder["token"].as_u64().is_none_or(|t| t <= last),
            "{state:#}"
        );
    }
    scene.finish().await;
}

async fn show_as_text_lists_the_holder_then_the_queue(fx: Fixture) {
    let scene = Scene::contended(&fx, DEFAULT_LEASE).await;
    let out = tower_lock_ok(&args(&fx, &["show", KEY])).await;
    assert!(out.contains(&format!("lock        {KEY}")), "{out}");
    assert!(out.contains("held (1 holder, 2 waiting)"), "{out}");
    let at = |what: &str| out.find(what).unwrap_or_else(|| panic!("{what} in {out}"));
    let (holder, first, second) = (
        at(scene.holder.id()),
        at(scene.layer.id()),
        at(scene.direct.id()),
    );
    assert!(
        holder < first && first < second,
        "holder, then the queue in order: {out}"
    );
    assert!(out.contains("waiters, in queue order"), "{out}");
    scene.finish().await;
}

async fn a_free_lock_is_shown_free(fx: Fixture) {
    let out = tower_lock_ok(&args(&fx, &["show", "accounts/never"])).await;
    assert!(out.contains("state       free"), "{out}");
    let out = tower_lock_ok(&args(&fx, &["show", "accounts/never", "--json"])).await;
    let state: Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(state["free"], true);
    assert_eq!(state["holders"], Value::Array(vec![]));
    assert_eq!(state["waiters"], Value::Array(vec![]));
}

/// Hold `key` exclusively on `m`.
async fn hold(m: &LockManager, key: &str) -> tower_lock::LockGuard {
    m.acquire(key, &LockOptions::exclusive())
        .await
        .expect("hold")
}

async fn list_shows_the_used_locks_under_a_prefix(fx: Fixture) {
    let scene = Scene::contended(&fx, DEFAULT_LEASE).await;
    let (other, elsewhere) = (
        hold(&scene.direct, "accounts/7").await,
        hold(&scene.direct, "orders/1").await,
    );
    // on a cluster, listing walks every master
    let ran = tower_lock(&args(&fx, &["list", "accounts/", "--json"])).await;
    assert_eq!(ran.code, Some(0), "{ran:?}");
    let document: Value = serde_json::from_str(&ran.stdout).expect("JSON");
    let mut keys: Vec<&str> = (document["locks"].as_array().expect("locks").iter())
        .map(|s| s["key"].as_str().expect("key"))
        .collect();
    keys.sort_unstable();
    assert_eq!(keys, ["accounts/42", "accounts/7"], "{document:#}");
    assert_eq!(document["limit_reached"], false);

    let out = tower_lock_ok(&args(&fx, &["list", "accounts/"])).await;
    let lines: Vec<&str> = out.lines().collect();
    assert!(
        lines[0].starts_with("LOCK") && lines[0].contains("OLDEST WAIT"),
        "{out}"
    );
    let row = lines
        .iter()
        .find(|l| l.starts_with("accounts/42 "))
        .expect("the contended row");
    let state = scene.holder.inspect(KEY).await.expect("inspect");
    let HolderState { label, manager, .. } = &state.holders[0];
    assert!(
        row.contains(&table_name(label.as_deref(), manager)),
        "{row}"
    );
    let cells: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(cells.len(), 8, "one cell per column: {row}");
    assert_eq!((cells[1], cells[3], cells[6]), ("fair", "-", "2"), "{row}");
    assert!(lines.iter().any(|l| l.starts_with("accounts/7 ")), "{out}");
    assert!(!out.contains("orders/1"), "{out}");

    let limited = tower_lock_ok(&args(&fx, &["list", "--limit", "1", "--json"])).await;
    let limited: Value = serde_json::from_str(&limited).expect("JSON");
    assert_eq!(
        limited["locks"].as_array().map(Vec::len),
        Some(1),
        "{limited:#}"
    );
    assert_eq!(limited["limit_reached"], true);
    drop((other, elsewhere));
    scene.finish().await;
}
