//! Test support: throwaway `redis-server` processes on free loopback ports.
//!
//! Every [`RedisServer`] runs its own `redis-server` child process bound to
//! `127.0.0.1` on a free port, with persistence disabled and its own temporary
//! directory, so integration tests never depend on a Redis at 6379 and can run
//! in parallel (threads under `cargo test`, processes under nextest).
//!
//! Only the Rust standard library is used, so `mod support;` compiles in any
//! test binary. Commands are sent with a tiny RESP2 client ([`redis_cmd`]).
#![allow(dead_code)]

pub mod fixture;
mod resp;
pub mod stats;

use resp::redis_cmd_with;
pub use resp::{redis_cmd, redis_cmd_bytes, Reply};

use std::collections::BTreeSet;
use std::fs;
use std::io;
use std::net::{Ipv4Addr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::thread;
use std::time::{Duration, Instant};

/// Path of the server binary; `redis-server` is looked up on `PATH`.
const REDIS_SERVER_BIN: &str = "redis-server";
/// How long to wait for a freshly spawned server to answer `PING`.
const STARTUP_TIMEOUT: Duration = Duration::from_secs(10);
/// How long `start_on` / `restart` keep retrying while the port is busy.
const PORT_BUSY_RETRY: Duration = Duration::from_secs(5);
/// How many different ports `start()` tries before giving up.
const START_ATTEMPTS: usize = 10;

/// Ports already handed out by this process (never handed out twice).
static HANDED_OUT_PORTS: Mutex<BTreeSet<u16>> = Mutex::new(BTreeSet::new());
/// Counter making temp dir names unique within this process.
static DIR_COUNTER: AtomicUsize = AtomicUsize::new(0);

/// Locks a mutex, ignoring poisoning (a panicking test must not break others).
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Returns a currently free TCP port on 127.0.0.1.
///
/// Binds `127.0.0.1:0`, reads the port the OS picked and drops the listener.
/// A process-wide set makes sure the same port is never handed out twice by
/// this process; across processes (nextest) [`RedisServer::start`] retries on
/// another port if the server cannot bind.
pub fn free_port() -> u16 {
    for _ in 0..1000 {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .expect("support::free_port: cannot bind 127.0.0.1:0");
        let port = listener
            .local_addr()
            .expect("support::free_port: no local address")
            .port();
        drop(listener);
        if lock(&HANDED_OUT_PORTS).insert(port) {
            return port;
        }
    }
    panic!("support::free_port: could not find an unused free port");
}

/// Polls `cond` every 10 ms until it returns `true` or `timeout` elapses;
/// returns whether the condition became true.
pub fn wait_until(timeout: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        thread::sleep(Duration::from_millis(10));
    }
}

// ---------------------------------------------------------------------------
// RESP2
// ---------------------------------------------------------------------------

/// Value of `field` in the text of an `INFO` reply (`field:value` lines).
fn info_field<'a>(info: &'a str, field: &str) -> Option<&'a str> {
    info.lines().find_map(|line| {
        let (k, v) = line.split_once(':')?;
        (k == field).then(|| v.trim())
    })
}

// ---------------------------------------------------------------------------
// Server process
// ---------------------------------------------------------------------------

/// Why spawning a server failed.
enum SpawnError {
    /// The server exited because the port was already in use.
    PortBusy(String),
    /// Any other failure (message includes the server log).
    Failed(String),
}

fn read_from(path: &Path, offset: u64) -> String {
    match fs::read(path) {
        Ok(bytes) => {
            let start = (offset as usize).min(bytes.len());
            String::from_utf8_lossy(&bytes[start..]).into_owned()
        }
        Err(_) => String::new(),
    }
}

fn file_len(path: &Path) -> u64 {
    fs::metadata(path).map(|m| m.len()).unwrap_or(0)
}

/// Checks that the server answering on `port` is our child `pid` and is ready.
fn probe(port: u16, pid: u32) -> bool {
    let short = Duration::from_millis(500);
    match redis_cmd_with(port, &[b"PING"], short, short) {
        Ok(Reply::Status(s)) if s == "PONG" => {}
        _ => return false,
    }
    // Make sure PONG came from our process and not from another test's server
    // that already owns this port (our child will then exit with EADDRINUSE).
    match redis_cmd_with(port, &[b"INFO", b"server"], short, short) {
        Ok(reply) => reply
            .as_string()
            .and_then(|info| info_field(&info, "process_id").map(|p| p == pid.to_string()))
            .unwrap_or(false),
        Err(_) => false,
    }
}

/// Spawns `redis-server` on `port` with its files in `dir`, and waits until it
/// answers PING (or fails).
fn spawn_server(port: u16, dir: &Path) -> Result<Child, SpawnError> {
    fs::create_dir_all(dir).map_err(|e| {
        SpawnError::Failed(format!("cannot create temp dir {}: {e}", dir.display()))
    })?;
    let log_path = dir.join("redis.log");
    let stderr_path = dir.join("stderr.log");
    let log_offset = file_len(&log_path);
    let stderr_offset = file_len(&stderr_path);
    let stderr_file = fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&stderr_path)
        .map_err(|e| SpawnError::Failed(format!("cannot open {}: {e}", stderr_path.display())))?;

    let spawned = Command::new(REDIS_SERVER_BIN)
        .arg("--port")
        .arg(port.to_string())
        .args(["--bind", "127.0.0.1"])
        .args(["--save", ""])
        .args(["--appendonly", "no"])
        .arg("--dir")
        .arg(dir)
        .arg("--logfile")
        .arg(&log_path)
        .args(["--daemonize", "no"])
        .args(["--protected-mode", "no"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::from(stderr_file))
        .spawn();
    let mut child = match spawned {
        Ok(child) => child,
        Err(e) if e.kind() == io::ErrorKind::NotFound => panic!(
            "support: `{REDIS_SERVER_BIN}` not found on PATH; integration tests need a local \
             Redis binary. Install it, e.g. `apt-get install redis-server`."
        ),
        Err(e) => panic!("support: failed to spawn `{REDIS_SERVER_BIN}`: {e}"),
    };
    let pid = child.id();

    let logs = || {
        format!(
            "--- redis.log ---\n{}\n--- stderr ---\n{}",
            read_from(&log_path, log_offset),
            read_from(&stderr_path, stderr_offset)
        )
    };

    let deadline = Instant::now() + STARTUP_TIMEOUT;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => {
                let log = logs();
                let msg =
                    format!("redis-server on port {port} exited during startup ({status})\n{log}");
                return Err(if log.contains("Address already in use") {
                    SpawnError::PortBusy(msg)
                } else {
                    SpawnError::Failed(msg)
                });
            }
            Ok(None) => {}
            Err(e) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(SpawnError::Failed(format!(
                    "try_wait on redis-server failed: {e}"
                )));
            }
        }
        if probe(port, pid) {
            return Ok(child);
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Err(SpawnError::Failed(format!(
                "redis-server on port {port} did not answer PING within {STARTUP_TIMEOUT:?}\n{}",
                logs()
            )));
        }
        thread::sleep(Duration::from_millis(20));
    }
}

/// Spawns on a fixed port, retrying for a few seconds while the port is busy.
fn spawn_on_port_retrying(port: u16, dir: &Path) -> Result<Child, String> {
    let deadline = Instant::now() + PORT_BUSY_RETRY;
    loop {
        match spawn_server(port, dir) {
            Ok(child) => return Ok(child),
            Err(SpawnError::PortBusy(msg)) => {
                if Instant::now() >= deadline {
                    return Err(format!(
                        "port {port} stayed busy for {PORT_BUSY_RETRY:?}: {msg}"
                    ));
                }
                thread::sleep(Duration::from_millis(100));
            }
            Err(SpawnError::Failed(msg)) => return Err(msg),
        }
    }
}

fn new_temp_dir(port: u16) -> PathBuf {
    let n = DIR_COUNTER.fetch_add(1, Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!(
        "tower-lock-redis-{}-{}-{}",
        std::process::id(),
        n,
        port
    ));
    // A stale directory could only come from an earlier process with our pid.
    let _ = fs::remove_dir_all(&dir);
    dir
}

/// A `redis-server` child process on `127.0.0.1:<port>` with persistence
/// disabled and its own temporary directory. Killed and cleaned up on drop.
///
/// The type is `Send + Sync`, so it can be shared (e.g. in an `Arc`) with
/// threads that freeze/unfreeze the server or send commands.
pub struct RedisServer {
    /// `None` once killed (and reaped).
    child: Mutex<Option<Child>>,
    port: u16,
    dir: PathBuf,
}

impl RedisServer {
    /// Starts a server on a free loopback port and waits (≤ 10 s) until it
    /// answers `PING`. If the port turns out to be taken (race with another
    /// process), retries on a different port. Panics with the server log on
    /// failure, or with an install hint if `redis-server` is missing.
    pub fn start() -> RedisServer {
        let mut last_err = String::new();
        for _ in 0..START_ATTEMPTS {
            let port = free_port();
            let dir = new_temp_dir(port);
            match spawn_server(port, &dir) {
                Ok(child) => {
                    return RedisServer {
                        child: Mutex::new(Some(child)),
                        port,
                        dir,
                    }
                }
                Err(SpawnError::PortBusy(msg)) => {
                    let _ = fs::remove_dir_all(&dir);
                    last_err = msg;
                }
                Err(SpawnError::Failed(msg)) => {
                    let _ = fs::remove_dir_all(&dir);
                    panic!("support: {msg}");
                }
            }
        }
        panic!("support: could not start redis-server after {START_ATTEMPTS} ports; last error: {last_err}");
    }

    /// Starts a server on the given port (retrying for a few seconds while the
    /// port is busy, but never switching ports) and waits until it answers `PING`.
    pub fn start_on(port: u16) -> RedisServer {
        lock(&HANDED_OUT_PORTS).insert(port);
        let dir = new_temp_dir(port);
        let child = match spawn_on_port_retrying(port, &dir) {
            Ok(child) => child,
            Err(msg) => {
                let _ = fs::remove_dir_all(&dir);
                panic!("support: {msg}");
            }
        };
        RedisServer {
            child: Mutex::new(Some(child)),
            port,
            dir,
        }
    }

    /// The TCP port the server listens on (stays the same across [`restart`](Self::restart)).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Connection URL, `redis://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// The OS process id of the running server, if any.
    pub fn pid(&self) -> Option<u32> {
        lock(&self.child).as_ref().map(Child::id)
    }

    /// The server's temporary directory (holds `redis.log`).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The server log so far (all runs, including before restarts).
    pub fn log(&self) -> String {
        read_from(&self.dir.join("redis.log"), 0)
    }

    /// Kills the server with SIGKILL and reaps it. Idempotent. Works on a
    /// frozen (SIGSTOPped) server too.
    pub fn kill(&mut self) {
        if let Some(mut child) = lock(&self.child).take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    fn signal(&self, sig: &str) {
        let guard = lock(&self.child);
        let child = guard.as_ref().unwrap_or_else(|| {
            panic!(
                "support: cannot send {sig} to redis-server on port {}: not running",
                self.port
            )
        });
        // The child is not reaped while we hold it, so its pid cannot be reused.
        let status = Command::new("kill")
            .arg(format!("-{sig}"))
            .arg(child.id().to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .status()
            .unwrap_or_else(|e| panic!("support: failed to run `kill -{sig}`: {e}"));
        assert!(
            status.success(),
            "support: `kill -{sig} {}` failed: {status}",
            child.id()
        );
    }

    /// Freezes the server with SIGSTOP (connections stay open, nothing is
    /// answered). Panics if the server is not running.
    pub fn stop_process(&self) {
        self.signal("STOP");
    }

    /// Resumes a frozen server with SIGCONT. Panics if the server is not running.
    pub fn continue_process(&self) {
        self.signal("CONT");
    }

    /// Kills the server (SIGKILL) and starts a fresh, empty one on the SAME
    /// port and directory, retrying for a few seconds while the port is busy;
    /// waits until it answers `PING`.
    pub fn restart(&mut self) {
        self.kill();
        match spawn_on_port_retrying(self.port, &self.dir) {
            Ok(child) => *lock(&self.child) = Some(child),
            Err(msg) => panic!("support: restart failed: {msg}"),
        }
    }

    /// True while the server process exists (a frozen server counts as
    /// running). Reaps the process if it has exited.
    pub fn is_running(&self) -> bool {
        let mut guard = lock(&self.child);
        let exited = match guard.as_mut() {
            None => return false,
            Some(child) => !matches!(child.try_wait(), Ok(None)),
        };
        if exited {
            *guard = None;
        }
        !exited
    }

    /// Sends one command over a fresh connection and returns the reply (Redis
    /// errors come back as `Reply::Error`). Panics on I/O failure, e.g. when
    /// the server is down or frozen (read timeout 5 s).
    pub fn cmd(&self, args: &[&str]) -> Reply {
        self.try_cmd(args).unwrap_or_else(|e| {
            panic!(
                "support: redis command {args:?} on port {} failed: {e}",
                self.port
            )
        })
    }

    /// Like [`cmd`](Self::cmd) but returns I/O errors instead of panicking.
    pub fn try_cmd(&self, args: &[&str]) -> io::Result<Reply> {
        redis_cmd(self.port, args)
    }

    /// Like [`cmd`](Self::cmd) with binary-safe arguments.
    pub fn cmd_bytes(&self, args: &[&[u8]]) -> Reply {
        redis_cmd_bytes(self.port, args)
            .unwrap_or_else(|e| panic!("support: redis command on port {} failed: {e}", self.port))
    }

    /// The text of `INFO <section>`. Panics if the reply is not a string.
    pub fn info(&self, section: &str) -> String {
        let reply = self.cmd(&["INFO", section]);
        reply
            .as_string()
            .unwrap_or_else(|| panic!("support: unexpected INFO reply: {reply:?}"))
    }

    /// `CLIENT KILL TYPE pubsub`; returns the number of clients killed.
    pub fn client_kill_pubsub(&self) -> i64 {
        let reply = self.cmd(&["CLIENT", "KILL", "TYPE", "pubsub"]);
        reply
            .as_int()
            .unwrap_or_else(|| panic!("support: unexpected CLIENT KILL reply: {reply:?}"))
    }

    /// Number of connected pub/sub clients (lines of `CLIENT LIST TYPE pubsub`).
    pub fn pubsub_clients(&self) -> usize {
        let reply = self.cmd(&["CLIENT", "LIST", "TYPE", "pubsub"]);
        let text = reply
            .as_string()
            .unwrap_or_else(|| panic!("support: unexpected CLIENT LIST reply: {reply:?}"));
        text.lines().filter(|l| !l.trim().is_empty()).count()
    }

    /// `calls` for a command in `INFO commandstats` (e.g. `"evalsha"`, `"eval"`,
    /// `"publish"`; case-insensitive); 0 if the command was never called.
    /// Note that commands run inside Lua scripts via `redis.call` are counted too.
    pub fn command_calls(&self, cmd: &str) -> u64 {
        let info = self.info("commandstats");
        let key = format!("cmdstat_{}", cmd.to_ascii_lowercase());
        info_field(&info, &key)
            .and_then(|v| {
                v.split(',')
                    .find_map(|kv| kv.strip_prefix("calls="))
                    .and_then(|n| n.parse().ok())
            })
            .unwrap_or(0)
    }

    /// `total_commands_processed` from `INFO stats` (since the last (re)start;
    /// the `INFO` issued by this call is not yet included).
    pub fn total_commands(&self) -> u64 {
        let info = self.info("stats");
        info_field(&info, "total_commands_processed")
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("support: no total_commands_processed in INFO stats"))
    }
}

impl Drop for RedisServer {
    /// Kills (SIGKILL) and reaps the server and removes its temp dir; never panics.
    fn drop(&mut self) {
        let child = match self.child.get_mut() {
            Ok(slot) => slot.take(),
            Err(poisoned) => poisoned.into_inner().take(),
        };
        if let Some(mut child) = child {
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = fs::remove_dir_all(&self.dir);
    }
}
