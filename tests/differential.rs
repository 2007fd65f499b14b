//! Differential test: the memory backend and the Redis backend tell a caller the same story.
//!
//! Random short sequences of lock operations (acquire with a short wait, try-acquire, acquire with a
//! short fixed lease, re-entry through a guard's owner, release, drop, a fair try-acquire, and the
//! fixed leases running out) over 3 keys and 3 owners run once on `LockManager::memory()` and once on
//! a real redis-server (a fresh namespace per case; the third owner on a second manager, like another
//! replica). Every step's observable outcome — acquired / busy / timed out / refused for the other
//! mode / released / not held, whether the guard knew its lease was lost, and how each fencing token
//! relates to the earlier tokens of its key — must be the same on both. On a mismatch proptest shrinks
//! the sequence and prints both runs step by step.

mod support;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use support::RedisServer;
use tower_lock::{LockError, LockGuard, LockManager, LockOptions, LockOwner};

const KEYS: usize = 3;
const OWNERS: usize = 3;
/// How long an acquire waits for a lock someone else holds.
const WAIT: Duration = Duration::from_millis(50);
/// The fixed lease of `AcquireLeased`.
const LEASE: Duration = Duration::from_millis(250);
/// `Expire` sleeps this long: the lease, Redis's drift allowance (1% + 2 ms) and a margin.
const EXPIRE: Duration = Duration::from_millis(250 + 3 + 2 + 80);
/// An `Expire` follows every `AcquireLeased` within this many operations, so that no fixed lease runs
/// out between two steps (which would make the outcome a matter of timing): the lease outlasts the
/// acquisition and this many steps of at most `WAIT` and a round trip each.
const EXPIRE_WITHIN: usize = 2;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    /// The owner acquires the key, waiting at most `WAIT` (watchdog lease).
    Acquire { owner: usize, key: usize },
    /// The owner takes the key if it can without waiting.
    TryAcquire { owner: usize, key: usize },
    /// The owner acquires the key with the fixed lease `LEASE`, waiting at most `WAIT`.
    AcquireLeased { owner: usize, key: usize },
    /// The owner takes the key in fair mode if it can without waiting.
    TryFair { owner: usize, key: usize },
    /// The owner of a held guard acquires its key again (waiting at most `WAIT`). Guards are
    /// counted from the newest held.
    Reenter { guard: usize },
    /// A held guard is released.
    Release { guard: usize },
    /// A held guard is dropped (released in the background).
    Drop { guard: usize },
    /// Sleep until every fixed lease taken so far has run out.
    Expire,
}

/// How a fencing token relates to the tokens the same key had before in this run.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    /// Larger than every earlier one.
    Newer,
    /// Equal to the one first seen at that step (a re-entry).
    SameAs(usize),
    /// Neither: smaller than some earlier token and equal to none.
    Older,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Outcome {
    Acquired(Token),
    Busy,
    TimedOut,
    OtherMode,
    Released { was_lost: bool },
    NotHeld { was_lost: bool },
    Dropped { was_lost: bool },
    NoGuard,
    Expired,
    Failed(String),
}

fn op() -> impl Strategy<Value = Op> {
    let owner = 0..OWNERS;
    let key = 0..KEYS;
    let guard = 0..4usize;
    prop_oneof![
        4 => (owner.clone(), key.clone()).prop_map(|(owner, key)| Op::Acquire { owner, key }),
        4 => (owner.clone(), key.clone()).prop_map(|(owner, key)| Op::TryAcquire { owner, key }),
        2 => (owner.clone(), key.clone()).prop_map(|(owner, key)| Op::AcquireLeased { owner, key }),
        1 => (owner, key).prop_map(|(owner, key)| Op::TryFair { owner, key }),
        2 => guard.clone().prop_map(|guard| Op::Reenter { guard }),
        3 => guard.clone().prop_map(|guard| Op::Release { guard }),
        2 => guard.prop_map(|guard| Op::Drop { guard }),
    ]
}

/// A sequence of at most 20 operations, with an `Expire` at most `EXPIRE_WITHIN` operations after
/// each fixed-lease acquisition.
fn sequence() -> impl Strategy<Value = Vec<Op>> {
    prop::collection::vec(op(), 1..18).prop_map(|ops| {
        let mut out = Vec::with_capacity(ops.len() + 4);
        let mut left: Option<usize> = None;
        for op in ops {
            out.push(op);
            left = match (left, op) {
                (None, Op::AcquireLeased { .. }) => Some(EXPIRE_WITHIN),
                (Some(0), _) => unreachable!(),
                (Some(1), _) => {
                    out.push(Op::Expire);
                    None
                }
                (Some(n), _) => Some(n - 1),
                (None, _) => None,
            };
        }
        out.truncate(20);
        if out
            .last()
            .is_some_and(|op| matches!(op, Op::AcquireLeased { .. }))
        {
            out.push(Op::Expire);
        }
        out
    })
}

/// Where one run's locks live.
struct Side {
    owners: Vec<LockOwner>,
    /// On Redis: the server and the namespace, to see when a dropped guard's release has landed.
    redis: Option<(Arc<RedisServer>, String)>,
}

impl Side {
    /// The lock hash of key `k` (the README's `{N:K}`; our names need no escaping).
    fn lock_hash(&self, k: usize) -> Option<(&RedisServer, String)> {
        let (server, namespace) = self.redis.as_ref()?;
        Some((server, format!("{{{namespace}:k{k}}}")))
    }

    /// Redis's view of a lock and of the scripts run so far.
    fn snapshot(&self, k: usize) -> Option<(support::Reply, u64)> {
        let (server, hash) = self.lock_hash(k)?;
        tokio::task::block_in_place(|| {
            let state = server.cmd(&["HGETALL", &hash]);
            Some((
                state,
                server.command_calls("evalsha") + server.command_calls("eval"),
            ))
        })
    }

    /// After a guard was dropped: wait until its release (sent in the background) has reached
    /// Redis, so that the next step sees it as the memory backend does (it releases at once). A
    /// guard still held changes the lock hash; a lost one's release runs a script that changes
    /// nothing. A guard whose owner still holds the key through another (`sibling`) changes
    /// nothing in Redis when Redis counts one hold: the manager counted the re-entries itself
    /// (an exclusive lock's cohort), and the drop settled them at once.
    async fn settle_drop(
        &self,
        k: usize,
        before: Option<(support::Reply, u64)>,
        was_lost: bool,
        sibling: bool,
    ) {
        let (Some((server, hash)), Some((state, scripts))) = (self.lock_hash(k), before) else {
            return;
        };
        if sibling && !was_lost && counts_one_hold(&state) {
            return;
        }
        let deadline = Instant::now() + Duration::from_secs(2);
        while Instant::now() < deadline {
            let done = tokio::task::block_in_place(|| {
                if was_lost {
                    server.command_calls("evalsha") + server.command_calls("eval") > scripts
                } else {
                    server.cmd(&["HGETALL", &hash]) != state
                }
            });
            if done {
                return;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
}

/// Whether a lock hash (`HGETALL`) counts one hold for each of its owners (the fields that are
/// not marks, `#...`).
fn counts_one_hold(state: &support::Reply) -> bool {
    let fields = state.as_array().unwrap_or_default();
    fields.chunks(2).all(|pair| match pair {
        [field, count] => {
            let field = field.as_string().unwrap_or_default();
            field.starts_with('#') || count.as_int() == Some(1)
        }
        _ => true,
    })
}

struct Held {
    owner: usize,
    key: usize,
    guard: LockGuard,
}

fn classify(result: Result<Option<LockGuard>, LockError>) -> Result<LockGuard, Outcome> {
    match result {
        Ok(Some(guard)) => Ok(guard),
        Ok(None) => Err(Outcome::Busy),
        Err(LockError::Timeout { .. }) => Err(Outcome::TimedOut),
        Err(LockError::Unsupported { .. }) => Err(Outcome::OtherMode),
        Err(err) => Err(Outcome::Failed(err.to_string())),
    }
}

/// Run `ops` on `side`; one outcome per operation.
async fn run(side: Side, ops: Vec<Op>) -> Vec<Outcome> {
    let waiting = LockOptions::exclusive().wait_timeout(WAIT);
    let leased = waiting.lease(LEASE);
    let at_once = LockOptions::exclusive();
    let fair = LockOptions::fair();
    let mut held: Vec<Held> = Vec::new();
    // per key: (token, the step it was first seen at)
    let mut tokens: Vec<Vec<(u64, usize)>> = vec![Vec::new(); KEYS];
    let mut outcomes = Vec::with_capacity(ops.len());
    for (step, op) in ops.into_iter().enumerate() {
        // the `i`-th guard counting from the newest (operations mostly pick a recent one)
        let pick = |held: &Vec<Held>, i: usize| {
            (!held.is_empty()).then(|| held.len() - 1 - i % held.len())
        };
        // (owner, key, options, whether it waits) of an operation that acquires
        let target = match op {
            Op::Acquire { owner, key } => Some((owner, key, &waiting, true)),
            Op::TryAcquire { owner, key } => Some((owner, key, &at_once, false)),
            Op::AcquireLeased { owner, key } => Some((owner, key, &leased, true)),
            Op::TryFair { owner, key } => Some((owner, key, &fair, false)),
            Op::Reenter { guard } => {
                pick(&held, guard).map(|i| (held[i].owner, held[i].key, &waiting, true))
            }
            _ => None,
        };
        let outcome = match (op, target) {
            (_, Some((owner, key, opts, wait))) => {
                let who = &side.owners[owner];
                let result = if wait {
                    who.acquire(&name(key), opts).await.map(Some)
                } else {
                    who.try_acquire(&name(key), opts).await
                };
                match classify(result) {
                    Ok(guard) => {
                        let token = guard.fencing_token();
                        let seen = &mut tokens[key];
                        let relation =
                            if let Some(&(_, at)) = seen.iter().find(|(t, _)| *t == token) {
                                Token::SameAs(at)
                            } else if seen.iter().all(|(t, _)| *t < token) {
                                Token::Newer
                            } else {
                                Token::Older
                            };
                        if !matches!(relation, Token::SameAs(_)) {
                            seen.push((token, step));
                        }
                        held.push(Held { owner, key, guard });
                        Outcome::Acquired(relation)
                    }
                    Err(outcome) => outcome,
                }
            }
            (Op::Reenter { .. }, None) => Outcome::NoGuard,
            (Op::Release { guard }, _) => match pick(&held, guard) {
                None => Outcome::NoGuard,
                Some(i) => {
                    let Held { guard, .. } = held.remove(i);
                    let was_lost = guard.is_lost();
                    match guard.release().await {
                        Ok(()) => Outcome::Released { was_lost },
                        Err(LockError::NotHeld { .. }) => Outcome::NotHeld { was_lost },
                        Err(err) => Outcome::Failed(err.to_string()),
                    }
                }
            },
            (Op::Drop { guard }, _) => match pick(&held, guard) {
                None => Outcome::NoGuard,
                Some(i) => {
                    let Held { owner, key, guard } = held.remove(i);
                    let was_lost = guard.is_lost();
                    let sibling = held.iter().any(|h| h.owner == owner && h.key == key);
                    let before = side.snapshot(key);
                    drop(guard);
                    side.settle_drop(key, before, was_lost, sibling).await;
                    Outcome::Dropped { was_lost }
                }
            },
            (Op::Expire, _) => {
                tokio::time::sleep(EXPIRE).await;
                Outcome::Expired
            }
            (_, None) => unreachable!("every acquiring operation has a target"),
        };
        outcomes.push(outcome);
    }
    outcomes
}

/// Run `ops` on the memory backend and on Redis (namespace `namespace`, the last owner on a second
/// manager): the outcomes of each.
async fn both_sides(
    server: &Arc<RedisServer>,
    namespace: String,
    ops: Vec<Op>,
) -> Result<(Vec<Outcome>, Vec<Outcome>), TestCaseError> {
    let memory_manager = LockManager::memory();
    let redis_manager = |namespace: String| {
        let url = server.url();
        async move {
            LockManager::builder()
                .namespace(namespace)
                .redis(url)
                .build()
                .await
        }
    };
    let (first, second) = (
        redis_manager(namespace.clone()).await,
        redis_manager(namespace.clone()).await,
    );
    let (first, second) = (first.map_err(fail)?, second.map_err(fail)?);
    // A manager opens its command connection (and loads its scripts) on first use, which
    // can take longer than `WAIT` on a busy machine: an acquire whose attempt outlasts its
    // wait timeout times out by design. Open them before the run, on a key it never uses.
    for manager in [&first, &second] {
        let warm = manager
            .try_acquire("warm-up", &LockOptions::exclusive())
            .await;
        warm.map_err(fail)?
            .ok_or_else(|| fail("warm-up key busy"))?
            .release()
            .await
            .map_err(fail)?;
    }
    let memory = Side {
        owners: (0..OWNERS).map(|_| memory_manager.owner()).collect(),
        redis: None,
    };
    // the last owner is another replica's
    let redis = Side {
        owners: (0..OWNERS)
            .map(|o| {
                if o + 1 < OWNERS {
                    first.owner()
                } else {
                    second.owner()
                }
            })
            .collect(),
        redis: Some((server.clone(), namespace)),
    };
    let memory = tokio::spawn(run(memory, ops.clone()));
    let redis = tokio::spawn(run(redis, ops));
    Ok((memory.await.map_err(fail)?, redis.await.map_err(fail)?))
}

/// A regression: dropping an owner's re-entry of an exclusive lock, while a fixed lease of another
/// key runs, waited 2 s for a change in Redis that never comes (the cohort counts re-entries in
/// the manager), so the fixed lease ran out before the next step: memory said `Released`, Redis
/// `NotHeld { was_lost: true }`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_reentry_does_not_outwait_a_fixed_lease() {
    let server = Arc::new(RedisServer::start());
    let ops = vec![
        Op::Acquire { owner: 2, key: 0 },
        Op::Acquire { owner: 2, key: 0 },
        Op::AcquireLeased { owner: 0, key: 1 },
        Op::Drop { guard: 1 },
        Op::Release { guard: 0 },
        Op::Expire,
    ];
    let (memory, redis) = both_sides(&server, "reentry-drop".to_owned(), ops)
        .await
        .expect("both runs");
    assert_eq!(memory, redis);
    assert_eq!(redis[4], Outcome::Released { was_lost: false });
}

fn name(key: usize) -> String {
    format!("k{key}")
}

#[test]
fn memory_and_redis_tell_the_same_story() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let server = Arc::new(RedisServer::start());
    let cases = AtomicU64::new(0);
    let mut runner = TestRunner::new(Config {
        cases: 64,
        failure_persistence: None,
        ..Config::default()
    });
    let result = runner.run(&sequence(), |ops| {
        let namespace = format!("diff-{}", cases.fetch_add(1, Ordering::Relaxed));
        let (memory, redis) = rt.block_on(both_sides(&server, namespace.clone(), ops.clone()))?;
        if memory != redis {
            let mut steps = String::new();
            for (i, op) in ops.iter().enumerate() {
                let mark = if memory.get(i) == redis.get(i) {
                    " "
                } else {
                    "!"
                };
                steps.push_str(&format!(
                    "\n{mark} {i:2} {op:?}: memory {:?}, redis {:?}",
                    memory.get(i),
                    redis.get(i)
                ));
            }
            return Err(TestCaseError::fail(format!(
                "the backends disagree (namespace {namespace}):{steps}"
            )));
        }
        Ok(())
    });
    if let Err(err) = result {
        panic!("{err}");
    }
}

fn fail(err: impl std::fmt::Display) -> TestCaseError {
    TestCaseError::fail(err.to_string())
}
