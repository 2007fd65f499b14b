//! Spawning `redis-server` child processes on free loopback ports.

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

use super::info_field;
use super::resp::redis_cmd_with;
use super::Reply;

/// Path of the server binary; `redis-server` is looked up on `PATH`.
const REDIS_SERVER_BIN: &str = "redis-server";
/// How long to wait for a freshly spawned server to answer `PING`.
const STARTUP_TIMEOUT: Duration = Duration::from_secs(10);
/// How long `start_on` / `restart` keep retrying while the port is busy.
const PORT_BUSY_RETRY: Duration = Duration::from_secs(5);
/// How many different ports `start()` tries before giving up.
pub(super) const START_ATTEMPTS: usize = 10;

/// Ports already handed out by this process (never handed out twice).
pub(super) static HANDED_OUT_PORTS: Mutex<BTreeSet<u16>> = Mutex::new(BTreeSet::new());
/// Counter making temp dir names unique within this process.
static DIR_COUNTER: AtomicUsize = AtomicUsize::new(0);

/// Locks a mutex, ignoring poisoning (a panicking test must not break others).
pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
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

/// Why spawning a server failed.
pub(super) enum SpawnError {
    /// The server exited because the port was already in use.
    PortBusy(String),
    /// Any other failure (message includes the server log).
    Failed(String),
}

pub(super) fn read_from(path: &Path, offset: u64) -> String {
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
pub(super) fn spawn_server(port: u16, dir: &Path) -> Result<Child, SpawnError> {
    spawn_server_with(port, dir, &[])
}

/// Like [`spawn_server`], with `extra` arguments after the usual ones (a later
/// argument overrides an earlier one, e.g. `--appendonly yes`).
pub(super) fn spawn_server_with(
    port: u16,
    dir: &Path,
    extra: &[&str],
) -> Result<Child, SpawnError> {
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
        .args(extra)
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
pub(super) fn spawn_on_port_retrying(port: u16, dir: &Path) -> Result<Child, String> {
    spawn_on_port_retrying_with(port, dir, &[])
}

/// Like [`spawn_on_port_retrying`], with `extra` arguments (see [`spawn_server_with`]).
pub(super) fn spawn_on_port_retrying_with(
    port: u16,
    dir: &Path,
    extra: &[&str],
) -> Result<Child, String> {
    let deadline = Instant::now() + PORT_BUSY_RETRY;
    loop {
        match spawn_server_with(port, dir, extra) {
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

pub(super) fn new_temp_dir(port: u16) -> PathBuf {
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
