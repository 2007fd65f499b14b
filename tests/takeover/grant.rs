//! A fair grant read after its waiter's inbox went unproven for a grace: the hold it names may
//! have been taken over as a dead holder's and the lock granted on, so the waiter asks Redis
//! instead of taking it.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use tower_lock::{LockManager, LockOptions};

use super::live::inbox_client_of;
use super::support::stopped::wait_until_stopped;
use super::support::{eventually, RedisServer};
use super::{CHILD_ROLE, CHILD_URL, GRACE, LEASE, TAKEOVER_BOUND};

/// Every manager's fair eviction (the claim a grant starts with: the releasing manager sets it,
/// the waiting one counts on it) and command timeout: longer than the child's freeze.
const EVICTION: Duration = Duration::from_secs(10);

async fn manager(url: &str) -> LockManager {
    let builder = LockManager::builder().redis(url).lease(LEASE);
    let builder = builder.takeover_grace(GRACE).fair_eviction(EVICTION);
    let builder = builder.command_timeout(EVICTION).local_handoffs(0);
    builder.build().await.expect("manager")
}

/// The child: wait for "held" in fair mode, and say how the wait ended (keeping the guard).
pub(super) async fn wait_and_report(url: &str) {
    let m = manager(url).await;
    println!("READY {}", m.id());
    match m.acquire("held", &LockOptions::fair()).await {
        Ok(guard) => {
            println!(
                "GRANTED lost={} token={}",
                guard.is_lost(),
                guard.fencing_token()
            );
            let until_closed = || std::io::stdin().read_line(&mut String::new());
            let _ = tokio::task::spawn_blocking(until_closed).await;
            drop(guard);
        }
        Err(err) => println!("ERROR {err}"),
    }
}

fn signal(pid: u32, sig: &str) {
    let sent = Command::new("kill").args([sig, &pid.to_string()]).status();
    assert!(sent.expect("kill").success());
}

/// The child waits; it is frozen; the lock is granted to it (the message waits in its socket);
/// Redis closes its inbox, and another process's waiting request takes the grant's hold over.
/// The child resumes within its grant's claim and reads the grant: it must not take it. (Before,
/// it returned a guard already lost, under a token below the one the takeover handed on.)
pub(super) async fn a_grant_read_after_its_takeover_deadline_is_not_taken() {
    let server = RedisServer::start();
    let holding = manager(&server.url()).await;
    let held = holding.acquire("held", &LockOptions::fair()).await.unwrap();
    let mut child = Command::new(std::env::current_exe().expect("test binary"))
        .env(CHILD_URL, server.url())
        .env(CHILD_ROLE, "wait and report")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn the child");
    let (lines, said) = mpsc::channel();
    let stdout = BufReader::new(child.stdout.take().expect("child stdout"));
    std::thread::spawn(move || stdout.lines().for_each(|l| drop(lines.send(l.unwrap()))));
    let ready = said.recv_timeout(Duration::from_secs(10)).expect("READY");
    let child_id = ready
        .strip_prefix("READY ")
        .expect("READY and an id")
        .to_owned();
    let queued = || server.cmd(&["LLEN", "{tower-lock:held}:ql"]).as_int() == Some(1);
    assert!(eventually(Duration::from_secs(5), queued).await);

    signal(child.id(), "-STOP");
    wait_until_stopped(child.id());
    held.release().await.unwrap();
    server.cmd(&["CLIENT", "KILL", "ID", &inbox_client_of(&server, &child_id)]);
    let other = manager(&server.url()).await;
    let opts = LockOptions::fair().wait_timeout(TAKEOVER_BOUND);
    let taker = other
        .acquire("held", &opts)
        .await
        .expect("the grant taken over");
    signal(child.id(), "-CONT");
    if let Ok(line) = said.recv_timeout(Duration::from_secs(1)) {
        panic!("the resumed child took a grant that was taken over: {line}");
    }
    // it still waits, and gets the lock for real once the taker lets go
    let token = taker.fencing_token();
    taker.release().await.unwrap();
    let line = said
        .recv_timeout(Duration::from_secs(5))
        .expect("the child's grant");
    let (lost, got) = line.split_once(" token=").expect("a GRANTED line");
    assert_eq!(lost, "GRANTED lost=false");
    assert!(got.parse::<u64>().unwrap() > token);
    let _ = child.kill();
    let _ = child.wait();
}
