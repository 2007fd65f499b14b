//! Running the tests several at once, each in a process of its own.
//!
//! The tests mostly wait (for a grace, a failover, a killed holder's takeover): one after another
//! they took two minutes on two idle cores. A process each keeps one test's runtime, servers and
//! child holders apart from the others'; a few at a time share the cores.

use std::process::{Command, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::thread;

/// The variable that names the one test a process runs.
pub(crate) const ONE_TEST: &str = "TOWER_LOCK_TAKEOVER_TEST";

/// How many test processes run at once.
const AT_ONCE: usize = 4;

/// How many run at once of the tests that start a cluster (six servers each): beside the others,
/// their start stalled a live holder past its grace.
const CLUSTERS_AT_ONCE: usize = 2;

/// Runs each of `names` in a process of its own: those without "cluster" in their name
/// [`AT_ONCE`] at a time, then the others [`CLUSTERS_AT_ONCE`] at a time. Prints each one's
/// output whole, in order. Returns the names of the tests that failed.
pub(crate) fn run_each(names: &[&'static str]) -> Vec<&'static str> {
    let (clusters, others): (Vec<_>, Vec<_>) = names.iter().partition(|n| n.contains("cluster"));
    let mut failed = run_batch(&others, AT_ONCE);
    failed.extend(run_batch(&clusters, CLUSTERS_AT_ONCE));
    failed
}

/// Runs each of `names` in a process of its own, `at_once` at a time.
fn run_batch(names: &[&'static str], at_once: usize) -> Vec<&'static str> {
    let next = Arc::new(Mutex::new(0));
    let outputs: Arc<Mutex<Vec<Option<Output>>>> = Arc::new(Mutex::new(vec![None; names.len()]));
    let workers: Vec<_> = (0..at_once.min(names.len()))
        .map(|_| {
            let (next, outputs, names) = (next.clone(), outputs.clone(), names.to_vec());
            thread::spawn(move || loop {
                let i = {
                    let mut next = next.lock().unwrap();
                    *next += 1;
                    *next - 1
                };
                let Some(name) = names.get(i) else {
                    return;
                };
                let output = run_one(name);
                outputs.lock().unwrap()[i] = Some(output);
            })
        })
        .collect();
    for worker in workers {
        worker.join().expect("a test runner");
    }
    let outputs = std::mem::take(&mut *outputs.lock().unwrap());
    let mut failed = Vec::new();
    for (name, output) in names.iter().zip(outputs) {
        let output = output.expect("every test ran");
        eprint!("{}", String::from_utf8_lossy(&output.stderr));
        print!("{}", String::from_utf8_lossy(&output.stdout));
        match output.status.success() {
            true => println!("test {name} ... ok"),
            false => {
                println!("test {name} ... FAILED");
                failed.push(*name);
            }
        }
    }
    failed
}

/// One test's process, to its end (its output read as it comes, so that no pipe fills up).
fn run_one(name: &str) -> Output {
    Command::new(std::env::current_exe().expect("test binary"))
        .env(ONE_TEST, name)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn a test's process")
        .wait_with_output()
        .expect("wait for a test's process")
}
