//! Test support: throwaway `redis-server` processes on free loopback ports (plain, or TLS-only in
//! [`tls`]).
//!
//! Every [`RedisServer`] runs its own `redis-server` child process bound to
//! `127.0.0.1` on a free port, with persistence disabled and its own temporary
//! directory, so integration tests never depend on a Redis at 6379 and can run
//! in parallel (threads under `cargo test`, processes under nextest).
//!
//! Apart from tokio's timer in [`eventually`], the lock manager in [`fixture`] and `tracing` in
//! [`logs`], only the Rust standard library is used, so the module compiles in any test binary.
//! Commands are sent with a tiny RESP2 client ([`redis_cmd`]).
#![allow(dead_code, unused_imports)]

pub mod cluster;
pub mod fixture;
pub mod logs;
pub mod masters;
pub mod proxy;
mod resp;
pub mod sentinel;
mod spawn;
pub mod stats;
pub mod stopped;
pub mod tls;
mod wait;

pub use resp::{redis_cmd, redis_cmd_bytes, Reply};
pub use spawn::free_port;
use spawn::{
    lock, new_temp_dir, read_from, spawn_on_port_retrying, spawn_on_port_retrying_with,
    spawn_server, spawn_server_with, SpawnError, HANDED_OUT_PORTS, START_ATTEMPTS,
};
pub use wait::{eventually, wait_until, GENEROUS};

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;

/// Value of `field` in the text of an `INFO` reply (`field:value` lines).
fn info_field<'a>(info: &'a str, field: &str) -> Option<&'a str> {
    info.lines().find_map(|line| {
        let (k, v) = line.split_once(':')?;
        (k == field).then(|| v.trim())
    })
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
        RedisServer::start_with(&[])
    }

    /// Like [`start`](Self::start), with `extra` arguments for `redis-server` (e.g.
    /// `--cluster-enabled yes`).
    pub fn start_with(extra: &[&str]) -> RedisServer {
        let mut last_err = String::new();
        for _ in 0..START_ATTEMPTS {
            let port = free_port();
            let dir = new_temp_dir(port);
            match spawn_server_with(port, &dir, extra) {
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
        let pid = lock(&self.child).as_ref().map(Child::id);
        stopped::wait_until_stopped(pid.expect("support: the server stopped is running"));
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

    /// Kills the server (SIGKILL, if it still runs) and starts it again on the SAME port and
    /// directory with `extra` arguments after the usual ones (which they override, e.g.
    /// `["--appendonly", "yes"]`), keeping the directory's files: a `dump.rdb` or an
    /// `appendonlydir` left there is loaded, as after a machine's crash. Waits until it answers
    /// `PING`.
    pub fn restart_from_files(&mut self, extra: &[&str]) {
        self.kill();
        match spawn_on_port_retrying_with(self.port, &self.dir, extra) {
            Ok(child) => *lock(&self.child) = Some(child),
            Err(msg) => panic!("support: restart from files failed: {msg}"),
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

    /// `total_reads_processed` from `INFO stats`: the reads the server made from its clients'
    /// sockets, this call's `INFO` included. Commands written together are read together.
    pub fn total_reads(&self) -> u64 {
        let info = self.info("stats");
        info_field(&info, "total_reads_processed")
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("support: no total_reads_processed in INFO stats"))
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
