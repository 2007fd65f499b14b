//! Waiting for a SIGSTOP to take effect.
//!
//! `kill -STOP` returns once the signal is queued. The process stops thread by thread after that:
//! on a loaded machine, a thread already running may go on for milliseconds. A test that acts on
//! "the process is frozen" waits here first.

use std::time::{Duration, Instant};

/// Waits until every thread of process `pid` is stopped; panics after 10 s.
pub fn wait_until_stopped(pid: u32) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !all_threads_stopped(pid) {
        assert!(
            Instant::now() < deadline,
            "support: process {pid} did not stop within 10 s of SIGSTOP"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Whether every thread of `pid` is in the stopped state (`T`, or `t` when traced).
fn all_threads_stopped(pid: u32) -> bool {
    let Ok(threads) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return false;
    };
    threads.flatten().all(|thread| {
        let stat = std::fs::read_to_string(thread.path().join("stat")).unwrap_or_default();
        // the state is the first field after the command name's closing parenthesis
        let state = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.trim_start().chars().next());
        matches!(state, Some('T' | 't'))
    })
}
