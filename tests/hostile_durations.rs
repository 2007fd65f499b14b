//! Hostile durations and counts: every duration or count a user can hand the crate (a wait
//! timeout, a fixed lease, the manager's lease, eviction, command timeout and pool size, the
//! layer's wait, lease and `Retry-After`, a gRPC deadline, a semaphore's size) is either used
//! saturating — a wait of `Duration::MAX` waits forever, a lease beyond the maximum is lowered to it
//! — or refused with `LockError::Config`. Never a panic, in the caller or in a background task.
//!
//! Each case runs in memory, on Redis across two managers, and on Redis within one manager (the
//! requests of one process hand the lock to each other in memory: the cohort).

mod support;

use std::convert::Infallible;
use std::sync::Mutex;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::Full;
use support::{eventually, RedisServer, GENEROUS};
use tower::ServiceExt;
use tower_lock::key;
use tower_lock::{Lease, LockError, LockLayer, LockManager, LockOptions};

/// Wait timeouts at and near the edge of what `Instant` can represent, and one well inside it.
const HUGE_WAITS: [Duration; 4] = [
    Duration::MAX,
    Duration::from_secs(u64::MAX),
    Duration::from_secs(i64::MAX as u64),
    Duration::from_secs(1 << 40),
];

/// Fixed leases at and near every edge: `Duration`'s, Redis's milliseconds (`i64`), Lua's doubles.
const HUGE_LEASES: [Duration; 4] = [
    Duration::MAX,
    Duration::from_millis(u64::MAX),
    Duration::from_millis(i64::MAX as u64),
    Duration::from_millis(1 << 53),
];

/// Panics of the runtime's worker threads (background tasks: the watchdog, the inbox, releases),
/// which would not fail a test by themselves.
static BACKGROUND_PANICS: Mutex<Vec<String>> = Mutex::new(Vec::new());

fn watch_background_panics() {
    static HOOK: std::sync::Once = std::sync::Once::new();
    HOOK.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let thread = std::thread::current();
            if thread.name().is_some_and(|name| name.starts_with("tokio-")) {
                let mut panics = BACKGROUND_PANICS.lock().unwrap_or_else(|p| p.into_inner());
                panics.push(info.to_string());
            }
            default(info);
        }));
    });
}

fn assert_no_background_panic() {
    let panics = BACKGROUND_PANICS.lock().unwrap_or_else(|p| p.into_inner());
    assert!(panics.is_empty(), "background tasks panicked: {panics:?}");
}

/// Where the holder and the waiter of a case live.
#[derive(Debug, Clone, Copy)]
enum Place {
    Memory,
    /// Two managers of one Redis: every hand-off goes through Redis.
    Redis,
    /// One manager of Redis: its requests hand the lock on in memory.
    Cohort,
}

const PLACES: [Place; 3] = [Place::Memory, Place::Redis, Place::Cohort];

/// The holder's and the waiter's managers of `place`, and the server they use.
async fn managers(place: Place) -> (LockManager, LockManager, Option<RedisServer>) {
    match place {
        Place::Memory => {
            let m = LockManager::memory();
            (m.clone(), m, None)
        }
        Place::Redis => {
            let server = RedisServer::start();
            let a = LockManager::redis(&server.url()).await.expect("manager");
            let b = LockManager::redis(&server.url()).await.expect("manager");
            (a, b, Some(server))
        }
        Place::Cohort => {
            let server = RedisServer::start();
            let m = LockManager::redis(&server.url()).await.expect("manager");
            (m.clone(), m, Some(server))
        }
    }
}

/// A request with wait timeout `wait` for a lock held by another waits until the release and
/// then gets it; one on a free lock gets it at once.
async fn wait_then_take(holder: &LockManager, waiter: &LockManager, opts: LockOptions, key: &str) {
    let free = waiter.acquire(key, &opts).await.expect("a free lock");
    free.release().await.expect("release");

    let held = holder
        .acquire(key, &opts.wait_forever())
        .await
        .expect("hold");
    let waiting = {
        let (waiter, opts, key) = (waiter.clone(), opts, key.to_owned());
        tokio::spawn(async move { waiter.acquire(&key, &opts).await })
    };
    assert!(
        eventually(GENEROUS, || waiter.waiting() >= 1).await,
        "the request waits"
    );
    assert!(!waiting.is_finished(), "a huge wait timeout is not over");
    held.release().await.expect("release");
    let got = tokio::time::timeout(GENEROUS, waiting)
        .await
        .expect("the waiter gets the released lock")
        .expect("no panic")
        .expect("acquired");
    got.release().await.expect("release");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn huge_wait_timeouts_wait_for_the_release() {
    watch_background_panics();
    for place in PLACES {
        let (holder, waiter, _server) = managers(place).await;
        for (i, wait) in HUGE_WAITS.into_iter().enumerate() {
            for opts in [LockOptions::exclusive(), LockOptions::fair()] {
                let key = format!("wait-{i}-{}", opts.mode_value().name_for_test());
                wait_then_take(&holder, &waiter, opts.wait_timeout(wait), &key).await;
            }
            let read = LockOptions::read().wait_timeout(wait);
            let free = waiter.acquire("wait-read", &read).await.expect("read");
            free.release().await.expect("release");
        }
        assert_no_background_panic();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_zero_wait_timeout_takes_a_free_lock_and_gives_up_on_a_busy_one() {
    watch_background_panics();
    for place in PLACES {
        let (holder, waiter, _server) = managers(place).await;
        for opts in [LockOptions::exclusive(), LockOptions::fair()] {
            let opts = opts.wait_timeout(Duration::ZERO);
            let free = waiter.acquire("zero", &opts).await;
            let free = free.unwrap_or_else(|err| panic!("{place:?}: a free lock: {err:?}"));
            free.release().await.expect("release");
            let held = holder.acquire("zero", &opts).await.expect("hold");
            let busy = tokio::time::timeout(GENEROUS, waiter.acquire("zero", &opts))
                .await
                .expect("a zero wait ends at once");
            assert!(
                matches!(busy, Err(LockError::Timeout { .. })),
                "{place:?}: {busy:?}"
            );
            held.release().await.expect("release");
        }
        assert_no_background_panic();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn huge_fixed_leases_are_lowered_to_the_maximum() {
    watch_background_panics();
    for lease in HUGE_LEASES {
        assert_eq!(
            LockOptions::exclusive().lease(lease).lease_value(),
            Lease::Fixed(LockOptions::MAX_LEASE)
        );
    }
    for place in PLACES {
        let (holder, other, server) = managers(place).await;
        for (i, lease) in HUGE_LEASES.into_iter().enumerate() {
            for (name, opts, excluded) in [
                ("x", LockOptions::exclusive(), LockOptions::exclusive()),
                ("f", LockOptions::fair(), LockOptions::fair()),
                ("r", LockOptions::read(), LockOptions::write()),
                ("s", LockOptions::semaphore(1), LockOptions::semaphore(1)),
            ] {
                let key = format!("lease-{i}-{name}");
                let guard = holder
                    .acquire(&key, &opts.lease(lease))
                    .await
                    .expect("hold");
                assert!(!guard.is_lost(), "{place:?} {key}");
                if let Some(server) = &server {
                    let pttl = server
                        .cmd(&["PTTL", &format!("{{tower-lock:{key}}}")])
                        .as_int()
                        .expect("pttl");
                    let max_ms = LockOptions::MAX_LEASE.as_millis() as i64;
                    assert!(pttl > max_ms / 2 && pttl <= max_ms + max_ms / 50, "{pttl}");
                }
                let busy = other.try_acquire(&key, &excluded).await.expect("try");
                assert!(busy.is_none(), "{place:?} {key}: the hold excludes");
                // re-entry of the same owner with a huge lease, on top of a watchdog hold
                let owner = holder.owner();
                let first = owner
                    .acquire(&format!("{key}-re"), &opts)
                    .await
                    .expect("hold");
                let again = owner
                    .acquire(&format!("{key}-re"), &opts.lease(lease))
                    .await
                    .expect("re-enter");
                again.release().await.expect("release");
                first.release().await.expect("release");
                guard.release().await.expect("release");
            }
        }
        let short = holder
            .acquire(
                "lease-zero",
                &LockOptions::exclusive().lease(Duration::ZERO),
            )
            .await
            .expect("a zero lease is raised to 1 ms");
        tokio::time::timeout(GENEROUS, short.lost())
            .await
            .expect("a 1 ms lease is soon lost");
        assert_no_background_panic();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_semaphore_of_every_size_works() {
    watch_background_panics();
    for place in PLACES {
        let (a, b, _server) = managers(place).await;
        let all = LockOptions::semaphore(u32::MAX).wait_timeout(Duration::MAX);
        let one = a.acquire("sem-max", &all).await.expect("permit");
        let two = b.acquire("sem-max", &all).await.expect("permit");
        one.release().await.expect("release");
        two.release().await.expect("release");
        let zero = LockOptions::semaphore(0).wait_timeout(Duration::MAX);
        let only = a.acquire("sem-zero", &zero).await.expect("permit");
        let busy = b.try_acquire("sem-zero", &zero).await.expect("try");
        assert!(busy.is_none(), "{place:?}: semaphore(0) is one permit");
        only.release().await.expect("release");
        assert_no_background_panic();
    }
}

/// The builders of a memory and a Redis manager.
fn builders(server: &RedisServer) -> [tower_lock::LockManagerBuilder; 2] {
    [
        LockManager::builder(),
        LockManager::builder().redis(server.url()),
    ]
}

fn assert_config(outcome: Result<LockManager, LockError>, what: &str) {
    match outcome {
        Err(LockError::Config(message)) => {
            assert!(
                message.contains("at most"),
                "{what}: names the bound: {message}"
            );
        }
        other => panic!(
            "{what}: expected a Config error, got {:?}",
            other.map(|_| ())
        ),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_builder_refuses_durations_and_counts_beyond_its_bounds() {
    watch_background_panics();
    let server = RedisServer::start();
    for huge in [Duration::MAX, Duration::from_millis(u64::MAX)] {
        for builder in builders(&server) {
            assert_config(builder.lease(huge).build().await, "lease");
        }
        for builder in builders(&server) {
            assert_config(builder.fair_eviction(huge).build().await, "fair eviction");
        }
    }
    for builder in builders(&server) {
        let zero = builder.command_timeout(Duration::ZERO).build().await;
        assert!(
            matches!(zero, Err(LockError::Config(_))),
            "zero command timeout"
        );
    }
    for builder in builders(&server) {
        assert_config(builder.pool_size(u32::MAX).build().await, "pool size");
    }
    for builder in builders(&server) {
        assert_config(builder.local_handoffs(u32::MAX).build().await, "hand-offs");
    }
    let quorum = [
        "redis://127.0.0.1:1",
        "redis://127.0.0.1:2",
        "redis://127.0.0.1:3",
    ];
    let zero = LockManager::builder()
        .quorum(quorum)
        .node_timeout(Duration::ZERO);
    assert!(
        matches!(zero.build().await, Err(LockError::Config(_))),
        "zero node timeout"
    );
    assert_no_background_panic();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_builder_takes_durations_at_its_bounds() {
    watch_background_panics();
    let server = RedisServer::start();
    for builder in builders(&server) {
        let m = builder
            .lease(LockOptions::MAX_LEASE)
            .fair_eviction(LockOptions::MAX_LEASE)
            .command_timeout(Duration::MAX)
            .pool_size(0)
            .build()
            .await
            .expect("the maximum is allowed");
        let held = m
            .acquire("bounds", &LockOptions::fair())
            .await
            .expect("hold");
        let waiting = {
            let m = m.clone();
            tokio::spawn(async move {
                let opts = LockOptions::fair().wait_timeout(Duration::MAX);
                m.acquire("bounds", &opts).await
            })
        };
        assert!(eventually(GENEROUS, || m.waiting() >= 1).await);
        held.release().await.expect("release");
        let got = tokio::time::timeout(GENEROUS, waiting)
            .await
            .expect("granted")
            .expect("no panic")
            .expect("acquired");
        got.release().await.expect("release");
        m.shutdown().await.expect("shutdown");
    }
    assert_no_background_panic();
}

type Req = Request<Full<Bytes>>;

fn request(path: &str, grpc_timeout: Option<&str>) -> Req {
    let mut req = Request::builder().method("PUT").uri(path);
    if let Some(timeout) = grpc_timeout {
        req = req
            .header("content-type", "application/grpc")
            .header("grpc-timeout", timeout);
    }
    req.body(Full::new(Bytes::new())).expect("request")
}

async fn ok(_req: Req) -> Result<Response<Full<Bytes>>, Infallible> {
    Ok(Response::new(Full::new(Bytes::from_static(b"ok"))))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_layer_takes_extreme_durations() {
    watch_background_panics();
    for place in PLACES {
        let (holder, manager, _server) = managers(place).await;
        let service = tower::ServiceBuilder::new()
            .layer(
                LockLayer::new(manager.clone(), key::path())
                    .wait_timeout(Duration::MAX)
                    .lease(Duration::MAX),
            )
            .service_fn(ok);
        for grpc in [None, Some("99999999H"), Some("99999999n")] {
            let held = holder
                .acquire("/layer", &LockOptions::exclusive())
                .await
                .expect("hold");
            let waiting = tokio::spawn(service.clone().oneshot(request("/layer", grpc)));
            assert!(eventually(GENEROUS, || manager.waiting() >= 1 || waiting.is_finished()).await);
            held.release().await.expect("release");
            let response = tokio::time::timeout(GENEROUS, waiting)
                .await
                .expect("answered")
                .expect("no panic")
                .expect("infallible");
            assert_eq!(response.status(), StatusCode::OK, "{place:?} {grpc:?}");
        }

        let held = holder
            .acquire("/busy", &LockOptions::exclusive())
            .await
            .expect("hold");
        let no_wait = LockLayer::new(manager.clone(), key::path())
            .no_wait()
            .retry_after(Duration::MAX);
        let busy = tower::ServiceBuilder::new().layer(no_wait).service_fn(ok);
        let response = busy
            .oneshot(request("/busy", None))
            .await
            .expect("infallible");
        assert_eq!(response.status(), StatusCode::CONFLICT);
        assert!(response.headers().contains_key("retry-after"));
        let zero = LockLayer::new(manager.clone(), key::path()).wait_timeout(Duration::ZERO);
        let zero = tower::ServiceBuilder::new().layer(zero).service_fn(ok);
        let response = zero
            .oneshot(request("/busy", None))
            .await
            .expect("infallible");
        assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
        held.release().await.expect("release");
        assert_no_background_panic();
    }
}

/// A short name of a mode for key names.
trait NameForTest {
    fn name_for_test(self) -> &'static str;
}

impl NameForTest for tower_lock::Mode {
    fn name_for_test(self) -> &'static str {
        match self {
            tower_lock::Mode::Fair => "fair",
            _ => "other",
        }
    }
}
