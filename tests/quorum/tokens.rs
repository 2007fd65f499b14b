//! Exactly what the fencing tokens of quorum locks promise: the largest token of the granting
//! masters, rising across holders, counter expiry and restarts, and what a master clock ahead can do.

use std::time::Duration;

use tower_lock::LockOptions;

use crate::support::masters::Masters;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_token_is_the_largest_of_the_granting_masters_and_reentry_keeps_it() {
    let masters = Masters::start(3);
    let m = masters.manager(Duration::from_secs(30)).await;
    // master 1 runs 5 s ahead; master 2 is held elsewhere, so masters 0 and 1 grant the lock
    masters.clock_ahead(1, "tok", Duration::from_secs(5));
    masters.foreign_hold(2, "tok", Duration::from_secs(30));
    let owner = m.owner();
    let g = owner
        .acquire("tok", &LockOptions::exclusive())
        .await
        .unwrap();
    let granted = [masters.counter(0, "tok"), masters.counter(1, "tok")];
    assert_eq!(g.fencing_token(), granted[0].max(granted[1]), "{granted:?}");
    assert_eq!(g.fencing_token(), granted[1], "the master ahead decides");
    let again = owner
        .acquire("tok", &LockOptions::exclusive())
        .await
        .unwrap();
    assert_eq!(
        again.fencing_token(),
        g.fencing_token(),
        "re-entry keeps it"
    );
    drop(again);
    g.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_rise_across_holders_counter_expiry_and_a_restarted_master() {
    let mut masters = Masters::start(3);
    let managers = [
        masters.manager(Duration::from_secs(30)).await,
        masters.manager(Duration::from_secs(30)).await,
    ];
    let mut last = 0;
    let mut take = |token: u64, when: &str| {
        assert!(token > last, "token went back {when}: {token} after {last}");
        last = token;
    };
    for i in 0..20 {
        let g = managers[i % 2]
            .acquire("rise", &LockOptions::exclusive())
            .await
            .unwrap();
        take(g.fencing_token(), "between holders");
        g.release().await.unwrap();
    }
    for server in &masters.servers {
        server.cmd(&["DEL", "{tower-lock:rise}:f"]);
    }
    let g = managers[0]
        .acquire("rise", &LockOptions::exclusive())
        .await
        .unwrap();
    take(g.fencing_token(), "after the counters expired");
    g.release().await.unwrap();
    masters.servers[0].restart();
    for i in 0..4 {
        let g = managers[i % 2]
            .acquire("rise", &LockOptions::exclusive())
            .await
            .unwrap();
        take(g.fencing_token(), "after a master restarted empty");
        g.release().await.unwrap();
    }
}

/// What the token does NOT promise, and what it does, with one master's clock ahead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_master_clock_ahead_can_lower_the_token_after_a_release_but_not_after_an_expiry() {
    let masters = Masters::start(3);
    let a = masters.manager(Duration::from_secs(30)).await;
    let b = masters.manager(Duration::from_secs(30)).await;

    // After a release, the next holder may not use the master that is an hour ahead. Holds of
    // others on one master pick each majority: {1, 2} for the first holder, {0, 1} for the second.
    masters.clock_ahead(2, "rel", Duration::from_secs(3600));
    masters.foreign_hold(0, "rel", Duration::from_secs(30));
    let first = a.acquire("rel", &LockOptions::exclusive()).await.unwrap();
    let t_first = first.fencing_token();
    assert_eq!(t_first, masters.counter(2, "rel"));
    let t_shared = masters.counter(1, "rel");
    masters.servers[0].cmd(&["DEL", "{tower-lock:rel}"]);
    first.release().await.unwrap();
    masters.foreign_hold(2, "rel", Duration::from_secs(30));
    let second = b.acquire("rel", &LockOptions::exclusive()).await.unwrap();
    let t_second = second.fencing_token();
    assert!(
        t_second < t_first,
        "documented limit: the master ahead lifted the first token ({t_first} vs {t_second})"
    );
    assert!(
        t_second > t_shared,
        "always: larger than what the shared master issued to the earlier holder"
    );
    second.release().await.unwrap();

    // After an expiry (a paused holder), a whole lease separates the two acquisitions: a master
    // ahead by less than the lease cannot lower the next token, even when the next holder does
    // not go through it.
    masters.clock_ahead(2, "exp", Duration::from_millis(200));
    masters.foreign_hold(0, "exp", Duration::from_secs(30));
    let paused = a
        .acquire(
            "exp",
            &LockOptions::exclusive().lease(Duration::from_millis(600)),
        )
        .await
        .unwrap();
    let t_paused = paused.fencing_token();
    assert_eq!(t_paused, masters.counter(2, "exp"));
    std::mem::forget(paused); // it never releases: its lease runs out
    masters.servers[0].cmd(&["DEL", "{tower-lock:exp}"]);
    masters.foreign_hold(2, "exp", Duration::from_secs(30));
    let next = b
        .acquire(
            "exp",
            &LockOptions::exclusive().wait_timeout(Duration::from_secs(5)),
        )
        .await
        .expect("acquired after the paused holder's lease ran out");
    assert!(
        next.fencing_token() > t_paused,
        "{} <= {t_paused}",
        next.fencing_token()
    );
}
