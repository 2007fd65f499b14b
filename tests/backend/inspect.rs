//! `LockManager::inspect` and `list`, on memory and on real servers: the holders and the queue of
//! a lock as one snapshot, in order, with tokens and leases, and the locks under a prefix.

use std::time::Duration;

use tower_lock::{LockError, LockFamily, LockManager, LockOptions, LockState, Mode};

use crate::on_both_backends;
use crate::support::fixture::Fixture;
use crate::support::GENEROUS;

on_both_backends!(
    an_exclusive_hold_shows_its_owner_reentry_token_and_lease,
    a_fair_queue_shows_its_waiters_in_order,
    a_read_write_lock_shows_every_read_and_the_queued_write,
    a_free_lock_is_a_state,
    list_finds_the_used_locks_under_a_prefix_up_to_its_limit,
);

/// The state of `key`, once `ready` holds for it (a waiter reaches the server after its call).
async fn state_when(m: &LockManager, key: &str, ready: impl Fn(&LockState) -> bool) -> LockState {
    let deadline = tokio::time::Instant::now() + GENEROUS;
    loop {
        let state = m.inspect(key).await.expect("inspect");
        if ready(&state) || tokio::time::Instant::now() > deadline {
            return state;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Whether an inspected hold's token is the guard's: a hold taken on the fast path (a lock nobody
/// used, on a standalone server) shows none, as only its holder knows it.
fn token_agrees(token: Option<u64>, guard: &tower_lock::LockGuard) -> bool {
    token.is_none_or(|token| token == guard.fencing_token())
}

async fn an_exclusive_hold_shows_its_owner_reentry_token_and_lease(fx: Fixture) {
    let (m, other) = (fx.manager().await, fx.manager().await);
    let owner = m.owner();
    let first = owner
        .acquire("insp:x", &LockOptions::exclusive())
        .await
        .unwrap();
    let second = owner
        .acquire("insp:x", &LockOptions::exclusive())
        .await
        .unwrap();
    let state = other.inspect("insp:x").await.unwrap();
    assert_eq!(state.key, "insp:x");
    assert_eq!(state.family, Some(LockFamily::Exclusive), "{state:?}");
    assert_eq!(state.holders.len(), 1, "{state:?}");
    let holder = &state.holders[0];
    assert_eq!(holder.manager, m.id());
    assert!(
        holder.owner.starts_with(&format!("{}:", m.id())),
        "{holder:?}"
    );
    assert_eq!(holder.mode, Mode::Exclusive);
    // re-entries made in the holder's process are counted there: a server records one hold
    if fx.is_memory() {
        assert_eq!(holder.count, 2, "{holder:?}");
    } else {
        assert!(holder.count >= 1, "{holder:?}");
    }
    assert!(token_agrees(holder.token, &first), "{holder:?}");
    let lease = holder.lease_left.expect("a watchdog lease has an expiry");
    // the server's lease allows for clock drift beyond the manager's
    assert!(
        lease > Duration::ZERO && lease <= m.lease() * 11 / 10,
        "{lease:?}"
    );
    assert!(state.last_token >= holder.token, "{state:?}");

    // another manager waiting in exclusive mode shows with its wait's age
    let waiting = tokio::spawn({
        let other = other.clone();
        async move { other.acquire("insp:x", &LockOptions::exclusive()).await }
    });
    if !fx.is_memory() {
        let state = state_when(&m, "insp:x", |s| !s.waiters.is_empty()).await;
        assert_eq!(state.waiters.len(), 1, "{state:?}");
        let waiter = &state.waiters[0];
        assert_eq!(
            (waiter.manager.as_str(), waiter.mode),
            (other.id(), Mode::Exclusive)
        );
        assert!(waiter.waited.expect("a manager's wait is timed") < GENEROUS);
    }
    drop(second);
    first.release().await.unwrap();
    let taken = waiting.await.unwrap().unwrap();
    let state = m.inspect("insp:x").await.unwrap();
    assert_eq!(state.holders.len(), 1, "{state:?}");
    assert_eq!(state.holders[0].manager, other.id());
    assert!(state.waiters.is_empty(), "{state:?}");
    taken.release().await.unwrap();
}

async fn a_fair_queue_shows_its_waiters_in_order(fx: Fixture) {
    let managers = [fx.manager().await, fx.manager().await, fx.manager().await];
    let holder = managers[0]
        .acquire("insp:f", &LockOptions::fair())
        .await
        .unwrap();
    let mut waits = Vec::new();
    for (i, m) in managers[1..].iter().enumerate() {
        let m = m.clone();
        waits.push(tokio::spawn(async move {
            m.acquire("insp:f", &LockOptions::fair()).await
        }));
        let queued = |s: &LockState| s.waiters.len() == i + 1;
        let state = state_when(&managers[0], "insp:f", queued).await;
        assert_eq!(state.waiters.len(), i + 1, "waiter {i} queued: {state:?}");
    }
    let state = managers[0].inspect("insp:f").await.unwrap();
    assert_eq!(state.family, Some(LockFamily::Fair), "{state:?}");
    assert_eq!(state.holders[0].mode, Mode::Fair);
    assert!(token_agrees(state.holders[0].token, &holder), "{state:?}");
    assert!(
        state.waiters.iter().all(|w| w.mode == Mode::Fair),
        "{state:?}"
    );
    let order: Vec<&str> = state.waiters.iter().map(|w| w.manager.as_str()).collect();
    if !fx.is_memory() {
        assert_eq!(order, [managers[1].id(), managers[2].id()]);
    }
    holder.release().await.unwrap();
    let first = waits.remove(0).await.unwrap().unwrap();
    let state = managers[0].inspect("insp:f").await.unwrap();
    assert_eq!(state.holders.len(), 1, "{state:?}");
    assert_eq!(state.holders[0].token, Some(first.fencing_token()));
    assert_eq!(state.waiters.len(), 1, "the second still waits: {state:?}");
    assert_eq!(state.waiters[0].manager, order[1]);
    first.release().await.unwrap();
    waits
        .remove(0)
        .await
        .unwrap()
        .unwrap()
        .release()
        .await
        .unwrap();
}

async fn a_read_write_lock_shows_every_read_and_the_queued_write(fx: Fixture) {
    let managers = [fx.manager().await, fx.manager().await, fx.manager().await];
    let reads = [
        managers[0]
            .acquire("insp:rw", &LockOptions::read())
            .await
            .unwrap(),
        managers[1]
            .acquire("insp:rw", &LockOptions::read())
            .await
            .unwrap(),
    ];
    let writer = managers[2].clone();
    let write = tokio::spawn(async move { writer.acquire("insp:rw", &LockOptions::write()).await });
    let state = state_when(&managers[0], "insp:rw", |s| !s.waiters.is_empty()).await;
    assert_eq!(state.family, Some(LockFamily::ReadWrite), "{state:?}");
    let mut tokens: Vec<Option<u64>> = state.holders.iter().map(|h| h.token).collect();
    tokens.sort();
    let mut expected: Vec<Option<u64>> = reads.iter().map(|g| Some(g.fencing_token())).collect();
    expected.sort();
    assert_eq!(tokens, expected, "{state:?}");
    assert!(state
        .holders
        .iter()
        .all(|h| h.mode == Mode::Read && h.count == 1));
    assert!(state
        .holders
        .iter()
        .all(|h| h.lease_left.is_some_and(|l| l > Duration::ZERO)));
    assert_eq!(state.waiters.len(), 1, "{state:?}");
    assert_eq!(state.waiters[0].mode, Mode::Write);
    if !fx.is_memory() {
        assert_eq!(state.waiters[0].manager, managers[2].id());
    }
    for read in reads {
        read.release().await.unwrap();
    }
    let written = write.await.unwrap().unwrap();
    let state = managers[0].inspect("insp:rw").await.unwrap();
    assert_eq!(state.holders.len(), 1, "{state:?}");
    assert_eq!(state.holders[0].mode, Mode::Write);
    assert_eq!(state.holders[0].token, Some(written.fencing_token()));
    assert!(state.last_token >= Some(written.fencing_token()));
    written.release().await.unwrap();
}

async fn a_free_lock_is_a_state(fx: Fixture) {
    let m = fx.manager().await;
    let never = m.inspect("insp:never").await.unwrap();
    assert!(never.is_free() && never.is_idle(), "{never:?}");
    assert_eq!((never.family, never.last_token), (None, None));
    let guard = m.acquire("insp:once", &LockOptions::fair()).await.unwrap();
    guard.release().await.unwrap();
    let once = m.inspect("insp:once").await.unwrap();
    assert!(once.is_idle(), "{once:?}");
    assert!(matches!(m.inspect("").await, Err(LockError::InvalidKey(_))));
}

async fn list_finds_the_used_locks_under_a_prefix_up_to_its_limit(fx: Fixture) {
    let m = fx.manager().await;
    let names = ["list/a", "list/b", "list/{c}:d %", "other/a"];
    let mut guards = Vec::new();
    for name in names {
        guards.push(m.acquire(name, &LockOptions::exclusive()).await.unwrap());
    }
    let freed = m
        .acquire("list/freed", &LockOptions::exclusive())
        .await
        .unwrap();
    freed.release().await.unwrap();
    // on a cluster, SCAN walks every master
    let listed = m.list("list/").await;
    let mut keys: Vec<String> = listed.unwrap().into_iter().map(|s| s.key).collect();
    keys.sort();
    assert_eq!(keys, ["list/a", "list/b", "list/{c}:d %"]);
    let limited = m.list_limited("list/", 2).await.unwrap();
    assert_eq!(limited.len(), 2, "{limited:?}");
    assert!(limited
        .iter()
        .all(|s| s.holders.len() == 1 && s.key.starts_with("list/")));
    assert!(m.list("nothing/").await.unwrap().is_empty());
    assert_eq!(m.list("").await.unwrap().len(), 4);
    drop(guards);
}
