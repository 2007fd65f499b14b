//! Processes that die or freeze while holding or waiting for a lock. The test binary runs itself as
//! the child process, so it has a plain `main` (`harness = false`).

mod support;

use std::io::{BufRead, BufReader};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use support::RedisServer;
use tower_lock::{LockManager, LockOptions};

const CHILD_URL: &str = "TOWER_LOCK_CHILD_URL";
const CHILD_ROLE: &str = "TOWER_LOCK_CHILD_ROLE";
const LEASE: Duration = Duration::from_secs(1);
const EVICTION: Duration = Duration::from_secs(1);

fn main() {
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    if let (Ok(url), Ok(role)) = (std::env::var(CHILD_URL), std::env::var(CHILD_ROLE)) {
        runtime.block_on(child(&url, &role));
        return;
    }
    let tests: [(&str, fn() -> _); 8] = [
        ("holder_killed_frees_the_lock_after_its_lease", || {
            Box::pin(holder_killed_frees_the_lock_after_its_lease())
                as std::pin::Pin<Box<dyn std::future::Future<Output = ()>>>
        }),
        (
            "killed_fair_waiter_stalls_the_queue_less_than_its_eviction",
            || Box::pin(dead_fair_waiter(Fault::Kill)),
        ),
        (
            "frozen_fair_waiter_stalls_the_queue_less_than_its_eviction",
            || Box::pin(dead_fair_waiter(Fault::Freeze)),
        ),
        (
            "a_waiter_frozen_past_its_eviction_is_skipped_at_once",
            || Box::pin(dead_fair_waiter(Fault::FreezePastEviction)),
        ),
        (
            "a_queue_whose_waiters_all_died_expires_with_their_heartbeats",
            || Box::pin(a_queue_whose_waiters_all_died_expires_with_their_heartbeats()),
        ),
        ("a_resumed_waiter_does_not_take_its_reclaimed_grant", || {
            Box::pin(a_resumed_waiter_does_not_take_its_reclaimed_grant())
        }),
        ("a_killed_holders_permit_returns_after_its_lease", || {
            Box::pin(a_killed_holders_permit_returns_after_its_lease())
        }),
        (
            "reads_behind_a_killed_write_waiter_get_in_beside_the_holders",
            || Box::pin(reads_behind_a_killed_write_waiter_get_in_beside_the_holders()),
        ),
    ];
    println!("\nrunning {} tests", tests.len());
    for (name, test) in tests {
        runtime.block_on(test());
        println!("test {name} ... ok");
    }
    println!(
        "\ntest result: ok. {} passed; 0 failed; 0 ignored; 0 measured; 0 filtered out\n",
        tests.len()
    );
}

async fn manager(url: &str) -> LockManager {
    LockManager::builder()
        .redis(url)
        .lease(LEASE)
        .fair_eviction(EVICTION)
        .build()
        .await
        .expect("manager")
}

/// The child: hold the lock, or queue for it, say so, and stay until killed (or the parent goes).
async fn child(url: &str, role: &str) {
    let m = manager(url).await;
    let _guard = if role == "hold" || role == "hold permit" {
        let (key, opts) = match role {
            "hold" => ("crash", LockOptions::exclusive()),
            _ => ("permit", LockOptions::semaphore(1)),
        };
        Some(m.acquire(key, &opts).await.expect("child acquire"))
    } else if role == "queue write" {
        let m2 = m.clone();
        tokio::spawn(async move { m2.acquire("rw", &LockOptions::write()).await });
        while m.queued() == 0 {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        None
    } else {
        let m2 = m.clone();
        let report = role == "queue and report";
        tokio::spawn(async move {
            let guard = m2.acquire("fair", &LockOptions::fair()).await?;
            if report {
                println!("GRANTED lost={}", guard.is_lost());
            }
            Ok::<_, tower_lock::LockError>(guard)
        });
        while m.queued() == 0 {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        None
    };
    println!("READY");
    // Exit when the parent goes away (its end of stdin closes), so a failed test leaves nothing.
    let _ = tokio::task::spawn_blocking(|| std::io::stdin().read_line(&mut String::new())).await;
    std::process::exit(0);
}

fn spawn_child(server: &RedisServer, role: &str) -> Child {
    spawn_child_reading(server, role).0
}

/// The child, and the rest of what it prints.
fn spawn_child_reading(server: &RedisServer, role: &str) -> (Child, BufReader<ChildStdout>) {
    let mut child = Command::new(std::env::current_exe().expect("test binary"))
        .env(CHILD_URL, server.url())
        .env(CHILD_ROLE, role)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn the child process");
    let mut line = String::new();
    let stdout = child.stdout.take().expect("child stdout");
    let mut reader = BufReader::new(stdout);
    reader.read_line(&mut line).expect("read child");
    assert_eq!(line.trim(), "READY");
    (child, reader)
}

async fn holder_killed_frees_the_lock_after_its_lease() {
    let server = RedisServer::start();
    let mut child = spawn_child(&server, "hold");
    let m = manager(&server.url()).await;
    // the child's watchdog keeps the lock for several leases while it lives
    tokio::time::sleep(LEASE * 2).await;
    assert!(m
        .try_acquire("crash", &LockOptions::exclusive())
        .await
        .unwrap()
        .is_none());

    child.kill().expect("SIGKILL the holder");
    child.wait().expect("reap");
    let killed = Instant::now();
    let opts = LockOptions::exclusive().wait_timeout(Duration::from_secs(10));
    let guard = m
        .acquire("crash", &opts)
        .await
        .expect("the dead holder's lease runs out");
    let waited = killed.elapsed();
    assert!(
        waited <= LEASE + Duration::from_millis(1500),
        "freed after {waited:?}"
    );
    guard.release().await.unwrap();
}

/// A semaphore permit held by a process that is killed returns to the others one lease later.
async fn a_killed_holders_permit_returns_after_its_lease() {
    let server = RedisServer::start();
    let mut child = spawn_child(&server, "hold permit");
    let m = manager(&server.url()).await;
    let opts = LockOptions::semaphore(1);
    tokio::time::sleep(LEASE * 2).await;
    assert!(m.try_acquire("permit", &opts).await.unwrap().is_none());
    child.kill().expect("SIGKILL the holder");
    child.wait().expect("reap");
    let killed = Instant::now();
    let opts = opts.wait_timeout(Duration::from_secs(10));
    let guard = m
        .acquire("permit", &opts)
        .await
        .expect("the permit returns");
    let waited = killed.elapsed();
    assert!(
        waited <= LEASE + Duration::from_millis(1500),
        "returned after {waited:?}"
    );
    guard.release().await.unwrap();
}

/// A write waiter at the head of a read/write lock's queue is killed while reads hold the lock: the
/// read queued behind it gets in beside the holders once the dead waiter's heartbeat runs out,
/// without waiting for a release.
async fn reads_behind_a_killed_write_waiter_get_in_beside_the_holders() {
    let server = RedisServer::start();
    let m = manager(&server.url()).await;
    let read = m.acquire("rw", &LockOptions::read()).await.unwrap();
    let mut child = spawn_child(&server, "queue write");
    let late_read = {
        let m = m.clone();
        tokio::spawn(async move {
            let opts = LockOptions::read().wait_timeout(Duration::from_secs(20));
            m.acquire("rw", &opts).await.expect("the late read")
        })
    };
    while m.queued() == 0 {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    assert_eq!(
        server.cmd(&["LLEN", "{tower-lock:rw}:qs"]).as_int(),
        Some(2)
    );
    child.kill().expect("SIGKILL the write waiter");
    child.wait().expect("reap");
    let killed = Instant::now();
    let late_read = late_read.await.expect("the late read's task");
    let waited = killed.elapsed();
    println!("  the read behind the dead write waited {waited:?} (eviction {EVICTION:?})");
    assert!(
        waited <= EVICTION + Duration::from_millis(1500),
        "{waited:?}"
    );
    assert!(!read.is_lost());
    late_read.release().await.unwrap();
    read.release().await.unwrap();
}

enum Fault {
    Kill,
    /// Frozen just before the release: the grant may reach it and wait out its claim lease.
    Freeze,
    /// Frozen for longer than the eviction deadline before the release: its heartbeat ran out, so
    /// the grant skips it (its pub/sub connection is still open: only the heartbeat tells).
    FreezePastEviction,
}

/// A fair waiter ahead of ours dies (or freezes) while queued: after the holder releases, our
/// waiter gets the lock within the eviction deadline, plus a margin.
async fn dead_fair_waiter(fault: Fault) {
    let server = RedisServer::start();
    let m = manager(&server.url()).await;
    let holder = m.acquire("fair", &LockOptions::fair()).await.unwrap();
    let mut child = spawn_child(&server, "queue");
    let ours = {
        let m = m.clone();
        tokio::spawn(async move {
            let opts = LockOptions::fair().wait_timeout(Duration::from_secs(20));
            let g = m.acquire("fair", &opts).await.expect("our waiter");
            (Instant::now(), g.fencing_token())
        })
    };
    while m.queued() == 0 {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    assert_eq!(
        server.cmd(&["LLEN", "{tower-lock:fair}:ql"]).as_int(),
        Some(2)
    );
    match fault {
        Fault::Kill => {
            child.kill().expect("SIGKILL the waiter");
            child.wait().expect("reap");
        }
        Fault::Freeze | Fault::FreezePastEviction => {
            let pid = child.id().to_string();
            let stopped = Command::new("kill")
                .args(["-STOP", &pid])
                .status()
                .expect("kill");
            assert!(stopped.success());
            support::stopped::wait_until_stopped(child.id());
        }
    }
    if let Fault::FreezePastEviction = fault {
        tokio::time::sleep(EVICTION + Duration::from_millis(300)).await;
    }
    let released = Instant::now();
    holder.release().await.unwrap();
    let (acquired, _token) = ours.await.expect("our waiter task");
    let stall = acquired.duration_since(released);
    if let Fault::Freeze | Fault::FreezePastEviction = fault {
        let _ = Command::new("kill")
            .args(["-CONT", &child.id().to_string()])
            .status();
        let _ = child.kill();
        let _ = child.wait();
    }
    println!("  queue stalled {stall:?} behind the dead waiter (eviction {EVICTION:?})");
    let bound = match fault {
        Fault::FreezePastEviction => Duration::from_millis(300),
        Fault::Kill | Fault::Freeze => EVICTION + Duration::from_millis(1500),
    };
    assert!(
        stall <= bound,
        "the queue stalled {stall:?} behind a dead waiter"
    );
}

/// A fair queue whose only waiter died, behind a holder that never lets go: the queue key does not
/// stay in Redis for ever; it expires with the dead waiter's heartbeat key, while a live waiter's
/// heartbeats keep its own queue.
async fn a_queue_whose_waiters_all_died_expires_with_their_heartbeats() {
    let server = RedisServer::start();
    let m = manager(&server.url()).await;
    let holder = m.acquire("fair", &LockOptions::fair()).await.unwrap();
    let mut child = spawn_child(&server, "queue");
    let queue = "{tower-lock:fair}:ql";
    assert_eq!(server.cmd(&["LLEN", queue]).as_int(), Some(1));
    // a live waiter of another process queues for another lock held by the holder's manager (one
    // of the holder's own would wait in memory behind it, with no queue in Redis to keep)
    let other = m.acquire("other", &LockOptions::fair()).await.unwrap();
    let waiting = manager(&server.url()).await;
    let live = {
        let waiting = waiting.clone();
        tokio::spawn(async move {
            waiting
                .acquire("other", &LockOptions::fair())
                .await
                .map(drop)
        })
    };
    let queued = support::eventually(Duration::from_secs(10), || waiting.queued() == 1).await;
    assert!(queued, "the live waiter queued in Redis");
    child.kill().expect("SIGKILL the waiter");
    child.wait().expect("reap");
    let killed = Instant::now();
    let gone = support::wait_until(EVICTION * 4, || {
        server.cmd(&["EXISTS", queue]).as_int() == Some(0)
    });
    assert!(
        gone,
        "the dead waiter's queue is still there {:?} after the kill",
        killed.elapsed()
    );
    println!(
        "  the dead waiter's queue expired {:?} after the kill",
        killed.elapsed()
    );
    // the live waiter's queue outlives several eviction periods: its heartbeats keep it
    tokio::time::sleep(EVICTION * 2).await;
    assert_eq!(
        server.cmd(&["LLEN", "{tower-lock:other}:ql"]).as_int(),
        Some(1)
    );
    assert!(!live.is_finished());
    // and the holder still holds its lock; the live waiter gets the other one when it is released
    assert!(!holder.is_lost());
    other.release().await.unwrap();
    live.await.unwrap().expect("the live waiter");
    holder.release().await.unwrap();
}

/// A waiter's process freezes; the lock is granted to it meanwhile, its claim lease runs out and
/// the next waiter takes the lock. When the frozen process resumes and reads its old grant, it must
/// not believe it holds the lock that another holds: either its request keeps waiting (a heartbeat
/// made it try again first, so it checks the grant) and gets the lock for real once the other
/// holder lets go, or it reads the grant first and gets a guard that is already lost.
async fn a_resumed_waiter_does_not_take_its_reclaimed_grant() {
    let server = RedisServer::start();
    let m = manager(&server.url()).await;
    let holder = m.acquire("fair", &LockOptions::fair()).await.unwrap();
    let (mut child, output) = spawn_child_reading(&server, "queue and report");
    let (lines, said) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in output.lines() {
            if lines.send(line.unwrap_or_default()).is_err() {
                return;
            }
        }
    });
    let ours = {
        let m = m.clone();
        tokio::spawn(async move {
            let opts = LockOptions::fair().wait_timeout(Duration::from_secs(20));
            m.acquire("fair", &opts).await.expect("our waiter")
        })
    };
    while m.queued() == 0 {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let pid = child.id().to_string();
    assert!(Command::new("kill")
        .args(["-STOP", &pid])
        .status()
        .unwrap()
        .success());
    support::stopped::wait_until_stopped(child.id());
    // the grant goes to the frozen child; its claim runs out; then the lock comes to us
    holder.release().await.unwrap();
    let ours = tokio::time::timeout(EVICTION * 5, ours)
        .await
        .expect("the frozen child's claim ran out")
        .unwrap();
    assert!(Command::new("kill")
        .args(["-CONT", &pid])
        .status()
        .unwrap()
        .success());
    // several heartbeat periods of the resumed child while we hold the lock
    let kept_waiting = match said.recv_timeout(EVICTION * 3) {
        Err(_) => true,
        Ok(line) => {
            assert_eq!(
                line.trim(),
                "GRANTED lost=true",
                "the resumed child believes it holds the lock we hold"
            );
            false
        }
    };
    assert!(!ours.is_lost());
    ours.release().await.unwrap();
    if kept_waiting {
        // its request still waits: it gets the lock for real once we let go
        let line = said
            .recv_timeout(EVICTION * 5)
            .expect("the child gets the lock after us");
        assert_eq!(line.trim(), "GRANTED lost=false");
        println!("  the resumed child kept waiting, then got the lock after us");
    } else {
        println!("  the resumed child's request ended with a guard already lost");
    }
    let _ = child.kill();
    let _ = child.wait();
}
