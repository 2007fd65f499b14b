//! Running several modes at once, each in a process of its own.
//!
//! A mode's processes mostly wait (on Redis, on PostgreSQL, on the fault schedule): one mode keeps
//! about a sixth of one core busy. Run one after another, the modes take their durations added
//! up; at once, as long as the longest, and each meets the others' load as a replica meets its
//! neighbours'. Each mode's schedule depends only on the seed and the mode, so a mode replays
//! alone (`CHAOS_MODES=fair CHAOS_SEED=...`) as it ran here.

use std::process::{Command, Output, Stdio};
use std::thread;

use crate::Mode;

/// Runs each of `modes` for `seconds` in a process of its own, all at once, with the schedules
/// `seed` gives them; prints each one's output whole, in order. Returns the names of the modes
/// that failed.
pub(crate) fn run_each(modes: &[Mode], seed: u64, seconds: u64) -> Vec<&'static str> {
    let runs: Vec<_> = (modes.iter())
        .map(|&mode| (mode, thread::spawn(move || run_one(mode, seed, seconds))))
        .collect();
    let mut failed = Vec::new();
    for (mode, run) in runs {
        let output = run.join().expect("a chaos mode's output");
        print!("{}", String::from_utf8_lossy(&output.stdout));
        eprint!("{}", String::from_utf8_lossy(&output.stderr));
        if !output.status.success() {
            failed.push(mode.name());
        }
    }
    failed
}

/// One mode's process, to its end (its output read as it comes, so that no pipe fills up).
fn run_one(mode: Mode, seed: u64, seconds: u64) -> Output {
    Command::new(std::env::current_exe().expect("test binary"))
        .env("CHAOS_MODES", mode.name())
        .env("CHAOS_SEED", seed.to_string())
        .env("CHAOS_SECONDS", seconds.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn a chaos mode's process")
        .wait_with_output()
        .expect("wait for a chaos mode's process")
}
