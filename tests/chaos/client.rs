//! A client process: one manager, `TASKS` tasks acquiring random keys until the deadline; each hold
//! writes its fencing token to PostgreSQL. One log line per acquire and per hold, written at once
//! (a frozen client keeps what it wrote; `check.rs` reads them):
//!
//! - `A <start ns> <duration ns> <ok|timeout|unavailable|other:…>`
//! - `H <key> <token> <start ns> <end ns> <lost ns|-> <accepted|refused|failed|read>`: a read
//!   writes nothing
//! - `DONE <tasks finished> <tasks>`, last.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio_postgres::Statement;
use tower_lock::{LockError, LockGuard, LockManager};

use crate::{manager, now_ns, postgres, Mode, Rng, KEYS, TASKS, WAIT};

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("client: {name} not set"))
}

/// The client's log: each line written with one `write` (no buffer to lose).
struct Log(Mutex<File>);

impl Log {
    fn line(&self, line: String) {
        let mut file = self.0.lock().unwrap_or_else(|p| p.into_inner());
        file.write_all(format!("{line}\n").as_bytes())
            .expect("write the log");
    }
}

struct Client {
    manager: LockManager,
    mode: Mode,
    until: u64,
    log: Log,
    db: tokio_postgres::Client,
    write: Statement,
}

pub async fn run(index: usize) {
    // exit when the orchestrator goes away (its end of our stdin closes)
    std::thread::spawn(|| {
        let _ = std::io::stdin().read_line(&mut String::new());
        std::process::exit(3);
    });
    let mode = Mode::parse(&env("CHAOS_MODE"));
    let urls: Vec<String> = env("CHAOS_URLS").split(',').map(str::to_owned).collect();
    let until: u64 = env("CHAOS_UNTIL").parse().expect("CHAOS_UNTIL");
    let seed: u64 = env("CHAOS_TASK_SEED").parse().expect("CHAOS_TASK_SEED");
    let table = env("CHAOS_TABLE");
    let file = OpenOptions::new()
        .create(true)
        .append(true)
        .open(env("CHAOS_LOG"))
        .expect("open the log");
    // Redis may be down (a fault) when we start: try until it answers
    let manager = loop {
        match manager(mode, &urls).await {
            Ok(m) => break m,
            Err(e) if now_ns() < until => {
                eprintln!("client {index}: manager: {e}; retrying");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!("client {index}: no manager: {e}"),
        }
    };
    let db = postgres().await;
    let write = db
        .prepare(&format!(
            "UPDATE {table} SET token = $1, writes = writes + 1 WHERE id = $2 AND token < $1"
        ))
        .await
        .expect("prepare the fenced write");
    let client = Arc::new(Client {
        manager,
        mode,
        until,
        log: Log(Mutex::new(file)),
        db,
        write,
    });
    let finished = Arc::new(AtomicUsize::new(0));
    for task in 0..TASKS {
        let (client, finished) = (client.clone(), finished.clone());
        let rng = Rng::new(seed.wrapping_mul(1000).wrapping_add(task as u64));
        tokio::spawn(async move {
            client.contend(rng).await;
            finished.fetch_add(1, Ordering::SeqCst);
        });
    }
    // a task ends within its last acquire (≤ the wait timeout) and hold; wait that, and margin
    let patience = Duration::from_nanos(until.saturating_sub(now_ns())) + WAIT * 2;
    let deadline = Instant::now() + patience;
    while finished.load(Ordering::SeqCst) < TASKS && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let done = finished.load(Ordering::SeqCst);
    client.log.line(format!("DONE {done} {TASKS}"));
}

impl Client {
    async fn contend(&self, mut rng: Rng) {
        // one owner for the task's whole run: a hold that a restart brings back from a snapshot
        // belongs to an owner that goes on acquiring, and must not pass for its re-entry
        let owner = self.manager.owner();
        while now_ns() < self.until {
            let (opts, read) = self.mode.options(&mut rng);
            let key = rng.below(KEYS);
            let name = format!("chaos-{key}");
            let start = now_ns();
            let started = Instant::now();
            let acquired = match rng.below(8) {
                // a wait timeout at the extreme, cut short by dropping the wait
                0 => {
                    let opts = opts.wait_timeout(Duration::MAX);
                    match tokio::time::timeout(WAIT, owner.acquire(&name, &opts)).await {
                        Ok(acquired) => acquired,
                        Err(_) => Err(LockError::Timeout {
                            key: name.clone(),
                            waited: WAIT,
                        }),
                    }
                }
                1 => {
                    owner
                        .acquire(&name, &opts.wait_timeout(Duration::ZERO))
                        .await
                }
                2..=4 => owner.acquire(&name, &opts).await,
                _ => self.manager.acquire(&name, &opts).await,
            };
            let took = started.elapsed().as_nanos();
            let outcome = match &acquired {
                Ok(_) => "ok".to_owned(),
                Err(LockError::Timeout { .. }) => "timeout".to_owned(),
                Err(e) if e.is_unavailable() => "unavailable".to_owned(),
                Err(e) => format!("other:{}", e.to_string().replace(char::is_whitespace, "_")),
            };
            self.log.line(format!("A {start} {took} {outcome}"));
            match acquired {
                Ok(guard) => self.hold(key, guard, read, &mut rng).await,
                // Redis is down: do not spin on it
                Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
            }
        }
    }

    /// The critical section: hold a few ms (or until told the lease is lost), then the fenced
    /// write, as a read-modify-write would do it (a `read` writes nothing).
    async fn hold(&self, key: usize, guard: LockGuard, read: bool, rng: &mut Rng) {
        let start = now_ns();
        let token = guard.fencing_token();
        let lost_at = Arc::new(AtomicU64::new(0));
        let watch = {
            let (info, lost_at) = (guard.info(), lost_at.clone());
            tokio::spawn(async move {
                info.lost().await;
                lost_at.store(now_ns(), Ordering::SeqCst);
            })
        };
        // mostly short; one in twenty long enough for renewals, and for a fault to catch it
        let hold = if rng.below(20) == 0 {
            rng.between(Duration::from_millis(200), Duration::from_millis(1200))
        } else {
            rng.between(Duration::from_millis(1), Duration::from_millis(5))
        };
        tokio::select! {
            _ = tokio::time::sleep(hold) => {}
            _ = guard.lost() => {}
        }
        let written = match read {
            true => "read",
            false => self.fenced_write(key, token).await,
        };
        let end = now_ns();
        watch.abort();
        let lost = match lost_at.load(Ordering::SeqCst) {
            0 if guard.is_lost() => end.to_string(),
            0 => "-".to_owned(),
            at => at.to_string(),
        };
        self.log
            .line(format!("H {key} {token} {start} {end} {lost} {written}"));
        // Err(NotHeld) after a lost lease, Err(Unavailable) while Redis is down: both expected
        let _ = guard.release().await;
    }

    /// Write `token` to the row of `key`, which refuses a token below the one it has.
    async fn fenced_write(&self, key: usize, token: u64) -> &'static str {
        let (token, key) = (token as i64, key as i32);
        let params: [&(dyn tokio_postgres::types::ToSql + Sync); 2] = [&token, &key];
        let write = self.db.execute(&self.write, &params);
        match tokio::time::timeout(Duration::from_secs(10), write).await {
            Ok(Ok(1)) => "accepted",
            Ok(Ok(_)) => "refused",
            Ok(Err(_)) | Err(_) => "failed",
        }
    }
}
