//! A hold in Redis that its owner does not hold in memory is not a re-entry. Owner O takes a lock
//! (token t1), the server saves a snapshot, O releases, another process takes and releases it
//! (t2 > t1), and the server restarts from the snapshot, which brings O's old hold back. O's next
//! acquisition holds nothing in memory: it must get a token above t2 (not t1 again), must not
//! fail for the restored hold's lease, and its release must free the lock (the restored count is
//! not added to).

use std::time::Duration;

use tower_lock::{LockError, LockManager, LockOptions, LockOwner};

use super::support::RedisServer;

/// A fixed lease far longer than the test: a restored hold outlives it.
const LONG: Duration = Duration::from_secs(60);

/// One lock of the scenario: its key, O's options (and how many holds O has at the snapshot),
/// the other process's options, and the options of a request O's hold keeps out.
struct Case {
    key: &'static str,
    owner_opts: LockOptions,
    holds: usize,
    other_opts: LockOptions,
    probe: LockOptions,
}

fn case(key: &'static str, owner_opts: LockOptions, other_opts: LockOptions) -> Case {
    Case {
        key,
        owner_opts,
        holds: 1,
        probe: other_opts,
        other_opts,
    }
}

async fn manager(server: &RedisServer, handoffs: Option<u32>) -> LockManager {
    let mut builder = LockManager::builder()
        .redis(server.url())
        .command_timeout(Duration::from_millis(500));
    if let Some(handoffs) = handoffs {
        builder = builder.local_handoffs(handoffs);
    }
    builder.build().await.unwrap()
}

/// `call` after the restart, retried while the connections come back (at most 10 s: far less
/// than the restored hold's lease).
async fn retried<T, F>(what: &str, mut call: impl FnMut() -> F) -> T
where
    F: std::future::Future<Output = Result<T, LockError>>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        match call().await {
            Ok(done) => return done,
            Err(err) => {
                let now = tokio::time::Instant::now();
                assert!(now < deadline, "{what} fails: {err}");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

/// The scenario for every case at once, on `server` (restarted by `restart`): the owners are made
/// by `owners_of`, the other process is `other`.
async fn run(
    server: &mut RedisServer,
    restart: impl FnOnce(&mut RedisServer),
    owners_of: &LockManager,
    other: &LockManager,
    cases: &[Case],
) {
    let owners: Vec<LockOwner> = cases.iter().map(|_| owners_of.owner()).collect();
    let mut first = Vec::new();
    let mut held = Vec::new();
    for (case, owner) in cases.iter().zip(&owners) {
        for _ in 0..case.holds {
            held.push(owner.acquire(case.key, &case.owner_opts).await.unwrap());
        }
        first.push(held.last().unwrap().fencing_token());
    }
    server.cmd(&["SET", "stale-reentry:saved", "1"]);
    assert!(server.cmd(&["SAVE"]).is_ok());
    for guard in held.drain(..) {
        guard.release().await.unwrap();
    }
    let mut second = Vec::new();
    for case in cases {
        let guard = other.acquire(case.key, &case.other_opts).await.unwrap();
        second.push(guard.fencing_token());
        guard.release().await.unwrap();
    }
    restart(server);
    assert_eq!(
        server.cmd(&["EXISTS", "stale-reentry:saved"]).as_int(),
        Some(1),
        "the restart did not load the snapshot"
    );
    for (i, (case, owner)) in cases.iter().zip(&owners).enumerate() {
        let (t1, t2) = (first[i], second[i]);
        assert!(t1 < t2, "{}: {t1} then {t2}", case.key);
        let opts = case.owner_opts.wait_timeout(Duration::from_secs(5));
        let what = format!("{}: O's own request", case.key);
        let guard = retried(&what, || owner.acquire(case.key, &opts)).await;
        let t3 = guard.fencing_token();
        assert!(
            t3 > t2,
            "{}: O got {t3} after the other process's {t2} (its own old token: {t1})",
            case.key
        );
        // the hold is O's alone, and its release frees the lock: the restored hold is gone
        let what = format!("{}: the other process's request", case.key);
        let probe = retried(&what, || other.try_acquire(case.key, &case.probe)).await;
        assert!(probe.is_none(), "{}: taken beside O's hold", case.key);
        guard.release().await.unwrap();
        let after = retried(&what, || other.try_acquire(case.key, &case.probe)).await;
        let after = after.unwrap_or_else(|| panic!("{}: still held after O's release", case.key));
        assert!(after.fencing_token() > t3, "{}", case.key);
        after.release().await.unwrap();
    }
}

/// Every path that is not cohorted, on a restart from an RDB snapshot.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restored_hold_of_an_owner_is_not_reentered() {
    let mut server = RedisServer::start();
    let owners = manager(&server, None).await;
    let other = manager(&server, None).await;
    let cases = [
        case(
            "excl-fixed",
            LockOptions::exclusive().lease(LONG),
            LockOptions::exclusive(),
        ),
        case(
            "fair-fixed",
            LockOptions::fair().lease(LONG),
            LockOptions::fair(),
        ),
        case("write", LockOptions::write(), LockOptions::write()),
        case("read", LockOptions::read(), LockOptions::write()),
        case(
            "semaphore",
            LockOptions::semaphore(1),
            LockOptions::semaphore(1),
        ),
    ];
    run(&mut server, RedisServer::restart, &owners, &other, &cases).await;
}

/// The same with `local_handoffs(0)`: every request goes to Redis with its own owner.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_local_handoffs_a_restored_hold_is_not_reentered() {
    let mut server = RedisServer::start();
    let owners = manager(&server, Some(0)).await;
    let other = manager(&server, Some(0)).await;
    let cases = [
        case(
            "exclusive",
            LockOptions::exclusive(),
            LockOptions::exclusive(),
        ),
        case("fair", LockOptions::fair(), LockOptions::fair()),
        Case {
            probe: LockOptions::write(),
            ..case("read", LockOptions::read(), LockOptions::read())
        },
    ];
    run(&mut server, RedisServer::restart, &owners, &other, &cases).await;
}

/// A variant: O held each lock twice at the snapshot (a restored re-entry count of 2, which O's
/// next acquisition must neither add to nor leave behind).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restored_reentry_count_is_not_added_to() {
    let mut server = RedisServer::start();
    let owners = manager(&server, Some(0)).await;
    let other = manager(&server, Some(0)).await;
    let twice = |key, owner_opts: LockOptions, other_opts| Case {
        holds: 2,
        ..case(key, owner_opts, other_opts)
    };
    let cases = [
        twice(
            "excl-fixed",
            LockOptions::exclusive().lease(LONG),
            LockOptions::exclusive(),
        ),
        twice("fair", LockOptions::fair(), LockOptions::fair()),
        twice("write", LockOptions::write(), LockOptions::write()),
        twice(
            "semaphore",
            LockOptions::semaphore(1),
            LockOptions::semaphore(1),
        ),
    ];
    run(&mut server, RedisServer::restart, &owners, &other, &cases).await;
}
