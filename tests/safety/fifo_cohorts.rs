//! Fair requests of one process hand a lock on in memory without giving up FIFO order across
//! processes: a request waits in its cohort only when nobody but the cohort's leader waited in
//! Redis when it came; one that came after a request of another process queues behind it in
//! Redis. A chain of hand-offs in memory never runs past the block of tokens its leader reserved.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::task::JoinHandle;
use tower_lock::{LockManager, LockOptions};

use super::support;
use support::{eventually, RedisServer, GENEROUS};

async fn manager(server: &RedisServer) -> LockManager {
    LockManager::builder()
        .redis(server.url())
        .build()
        .await
        .expect("manager")
}

/// Fair requests queued in Redis for `key` (of the default namespace).
fn queued_in_redis(server: &RedisServer, key: &str) -> i64 {
    let queue = format!("{{tower-lock:{key}}}:ql");
    server.cmd(&["LLEN", &queue]).as_int().unwrap_or(0)
}

/// The holds of a test, in the order they began: a name and a fencing token each.
type Order = Arc<Mutex<Vec<(&'static str, u64)>>>;

/// A fair request named `name` of `m` for `key`: once it holds, it is recorded in `order`, holds
/// 200 ms (time for the test to read Redis meanwhile) and releases.
fn request(
    m: &LockManager,
    key: &'static str,
    name: &'static str,
    order: &Order,
) -> JoinHandle<()> {
    let (m, order) = (m.clone(), order.clone());
    tokio::spawn(async move {
        let opts = LockOptions::fair().wait_timeout(Duration::from_secs(20));
        let guard = m.acquire(key, &opts).await.expect("fair acquire");
        order.lock().unwrap().push((name, guard.fencing_token()));
        tokio::time::sleep(Duration::from_millis(200)).await;
        guard.release().await.unwrap();
    })
}

async fn finish(tasks: Vec<JoinHandle<()>>, order: &Order) -> Vec<(&'static str, u64)> {
    for task in tasks {
        task.await.unwrap();
    }
    let order = order.lock().unwrap().clone();
    assert!(
        order.windows(2).all(|w| w[0].1 < w[1].1),
        "tokens out of order: {order:?}"
    );
    order
}

fn names(order: &[(&'static str, u64)]) -> Vec<&'static str> {
    order.iter().map(|(name, _)| *name).collect()
}

/// A holds the lock. A's second request finds nobody queued in Redis, and waits in memory; B's
/// request then queues in Redis, and A's third behind it. Released, the lock goes to A's second
/// request in memory (the next token, no script), then to B, then to A's third: the order they
/// came in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_waits_in_memory_only_when_nobody_queued_in_redis_before_it() {
    let server = RedisServer::start();
    let (a, b) = (manager(&server).await, manager(&server).await);
    let order = Order::default();
    let first = a.acquire("f", &LockOptions::fair()).await.unwrap();

    let second = request(&a, "f", "a2", &order);
    assert!(eventually(GENEROUS, || a.waiting() == 1).await, "a2 waits");
    assert_eq!(queued_in_redis(&server, "f"), 0, "a2 queued in Redis");
    let b1 = request(&b, "f", "b1", &order);
    assert!(eventually(GENEROUS, || queued_in_redis(&server, "f") == 1).await);
    let third = request(&a, "f", "a3", &order);
    assert!(
        eventually(GENEROUS, || queued_in_redis(&server, "f") == 2).await,
        "a3 came after b1, and must queue behind it in Redis"
    );

    let scripts = server.command_calls("evalsha");
    let token = first.fencing_token();
    first.release().await.unwrap();
    assert!(
        eventually(GENEROUS, || !order.lock().unwrap().is_empty()).await,
        "a2 was handed the lock"
    );
    assert_eq!(
        server.command_calls("evalsha"),
        scripts,
        "the hand-off to a2 went through Redis"
    );
    let order = finish(vec![second, b1, third], &order).await;
    assert_eq!(names(&order), ["a2", "b1", "a3"], "not FIFO");
    assert_eq!(
        order[0].1,
        token + 1,
        "a2's token is not the next of the block"
    );
}

/// B holds the lock; A's first request queues for it in Redis as its cohort's leader. A's
/// second request finds only that leader queued, and waits in memory behind it; B's second
/// request queues in Redis after them. The order: A's first, A's second (in memory), B's second.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_waits_in_memory_behind_its_leader_queued_in_redis() {
    let server = RedisServer::start();
    let (a, b) = (manager(&server).await, manager(&server).await);
    let order = Order::default();
    let holder = b.acquire("g", &LockOptions::fair()).await.unwrap();

    let a1 = request(&a, "g", "a1", &order);
    assert!(eventually(GENEROUS, || queued_in_redis(&server, "g") == 1).await);
    let a2 = request(&a, "g", "a2", &order);
    assert!(eventually(GENEROUS, || a.waiting() == 2).await, "a2 waits");
    assert_eq!(queued_in_redis(&server, "g"), 1, "a2 queued in Redis");
    let b2 = request(&b, "g", "b2", &order);
    assert!(eventually(GENEROUS, || queued_in_redis(&server, "g") == 2).await);

    holder.release().await.unwrap();
    let order = finish(vec![a1, a2, b2], &order).await;
    assert_eq!(names(&order), ["a1", "a2", "b2"], "not FIFO");
    assert_eq!(
        order[1].1,
        order[0].1 + 1,
        "a2 was not handed the lock in memory"
    );
}

/// A holds the lock; its second request asks Redis whether anybody waits (Redis frozen, so the
/// answer is out) when A releases. The hand-off waits for the answer: the second request
/// inherits the lock in memory, the next token of the block. (Before, the release gave the hold
/// back to Redis while the answer was out, and the request took the lock anew: under load, most
/// blocks served one hold.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hand_off_waits_for_a_request_still_asking_redis() {
    let server = RedisServer::start();
    let a = manager(&server).await;
    let first = a.acquire("ask", &LockOptions::fair()).await.unwrap();
    let token = first.fencing_token();

    server.stop_process();
    let order = Order::default();
    let second = request(&a, "ask", "a2", &order);
    // time for a2 to enter its cohort and send its question
    tokio::time::sleep(Duration::from_millis(200)).await;
    drop(first);
    server.continue_process();

    let order = finish(vec![second], &order).await;
    assert_eq!(order[0].1, token + 1, "a2 did not inherit the lock");
}

/// A holds the lock and B's request queues in Redis. A's second request asks Redis whether
/// anybody waits (Redis frozen) when A releases, so the hand-off reaches it before the answer.
/// The answer names B: A's second request passes the lock on (to Redis, which grants it to B)
/// and queues behind B. FIFO order holds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_that_finds_others_queued_passes_an_early_hand_off_on() {
    let server = RedisServer::start();
    let (a, b) = (manager(&server).await, manager(&server).await);
    let order = Order::default();
    let first = a.acquire("early", &LockOptions::fair()).await.unwrap();
    let b1 = request(&b, "early", "b1", &order);
    assert!(eventually(GENEROUS, || queued_in_redis(&server, "early") == 1).await);

    server.stop_process();
    let a2 = request(&a, "early", "a2", &order);
    tokio::time::sleep(Duration::from_millis(200)).await;
    drop(first);
    server.continue_process();

    let order = finish(vec![b1, a2], &order).await;
    assert_eq!(names(&order), ["b1", "a2"], "not FIFO");
}

/// 150 fair requests of one process for one lock, all waiting in memory (nobody else queues):
/// a chain of hand-offs gives the tokens of its leader's block and no more (63 after the
/// leader's own), then the lock goes back through Redis for a new block. Tokens rise strictly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chain_of_hand_offs_stays_within_its_block_of_tokens() {
    let server = RedisServer::start();
    let m = manager(&server).await;
    let holder = m.acquire("chain", &LockOptions::fair()).await.unwrap();
    let tokens = Arc::new(Mutex::new(vec![holder.fencing_token()]));
    let mut tasks = Vec::new();
    for _ in 0..150 {
        let (m, tokens) = (m.clone(), tokens.clone());
        tasks.push(tokio::spawn(async move {
            let guard = m.acquire("chain", &LockOptions::fair()).await.unwrap();
            tokens.lock().unwrap().push(guard.fencing_token());
            guard.release().await.unwrap();
        }));
    }
    assert!(
        eventually(GENEROUS, || m.waiting() == 150).await,
        "all wait"
    );
    assert_eq!(queued_in_redis(&server, "chain"), 0);
    holder.release().await.unwrap();
    let tokens = rising_tokens(tasks, &tokens).await;
    let mut run = 1;
    let mut longest = 1;
    for w in tokens.windows(2) {
        run = if w[1] == w[0] + 1 { run + 1 } else { 1 };
        longest = longest.max(run);
    }
    assert_eq!(
        longest, 64,
        "a chain ran past its block, or never filled it"
    );
}

/// 64 tasks of one process take one fair lock 20 times each, with nobody else waiting: the lock
/// goes on in memory, but at the end of each block of tokens. A request that comes while the hold
/// goes back to Redis waits for the next leader; it does not queue in Redis, where every later
/// request would find it and queue behind it, each hand-off a round trip from then on. (Before,
/// 158-376 script calls in five runs.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_process_alone_on_a_lock_keeps_handing_it_on_in_memory() {
    let server = RedisServer::start();
    let m = manager(&server).await;
    let tokens = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for _ in 0..64 {
        let (m, tokens) = (m.clone(), tokens.clone());
        tasks.push(tokio::spawn(async move {
            for _ in 0..20 {
                let guard = m.acquire("alone", &LockOptions::fair()).await.unwrap();
                tokens.lock().unwrap().push(guard.fencing_token());
                tokio::task::yield_now().await;
                guard.release().await.unwrap();
            }
        }));
    }
    let tokens = rising_tokens(tasks, &tokens).await;
    // the blocks' releases (20 blocks of 64), and no request queued in Redis by script
    let scripts = server.command_calls("evalsha");
    assert!(scripts <= 40, "{scripts} script calls for 20 blocks");
    assert_eq!(tokens.len(), 1280);
    let in_memory = super::cohorts::local_hand_offs(&tokens);
    // a block of 64 tokens serves 64 holds: 1,260 hand-offs in memory at most
    assert!(
        in_memory >= 1_200,
        "{in_memory} of 1,279 hand-offs in memory: requests queued in Redis"
    );
}

/// The tokens `tasks` recorded in `tokens`, once they are done, in the order the holds began:
/// rising strictly.
pub(super) async fn rising_tokens(
    tasks: Vec<JoinHandle<()>>,
    tokens: &Mutex<Vec<u64>>,
) -> Vec<u64> {
    for task in tasks {
        task.await.unwrap();
    }
    let tokens = tokens.lock().unwrap().clone();
    assert!(
        tokens.windows(2).all(|w| w[0] < w[1]),
        "tokens out of order"
    );
    tokens
}
