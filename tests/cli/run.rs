//! Running the built `tower-lock` binary: its exit code and what it printed.

use std::process::Stdio;
use std::time::Duration;

use crate::support::fixture::Fixture;
use crate::support::GENEROUS;

/// The path of the binary cargo built for this test.
pub const BIN: &str = env!("CARGO_BIN_EXE_tower-lock");

/// What one run of the tool left.
#[derive(Debug)]
pub struct Ran {
    /// The exit code (`None` when a signal ended it).
    pub code: Option<i32>,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
}

/// Run the tool with `args`, no standard input and no Redis URL in its environment; it must end
/// within `within`.
pub async fn tower_lock_within(args: &[String], within: Duration) -> Ran {
    let mut command = tokio::process::Command::new(BIN);
    command
        .args(args)
        .env_remove("TOWER_LOCK_REDIS_URL")
        .env_remove("REDIS_URL")
        .stdin(Stdio::null())
        .kill_on_drop(true);
    let output = tokio::time::timeout(within, command.output())
        .await
        .unwrap_or_else(|_| panic!("tower-lock {args:?} did not end within {within:?}"))
        .expect("run tower-lock");
    Ran {
        code: output.status.code(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// Run the tool with `args`; it must end within [`GENEROUS`].
pub async fn tower_lock(args: &[String]) -> Ran {
    tower_lock_within(args, GENEROUS).await
}

/// Run the tool with `args` and expect exit code 0; its standard output.
pub async fn tower_lock_ok(args: &[String]) -> String {
    let ran = tower_lock(args).await;
    assert_eq!(ran.code, Some(0), "tower-lock {args:?}: {ran:?}");
    ran.stdout
}

/// The options that point the tool at the fixture's servers.
pub fn target(fx: &Fixture) -> Vec<String> {
    match fx {
        Fixture::Memory(_) => panic!("the tool cannot reach a memory manager"),
        Fixture::Redis(server) => vec!["--redis".to_owned(), server.url()],
        #[cfg(feature = "cluster")]
        Fixture::Cluster(cluster) => {
            let mut args = vec!["--cluster".to_owned()];
            for url in cluster.urls() {
                args.extend(["--redis".to_owned(), url]);
            }
            args
        }
    }
}

/// The fixture's target options followed by `rest`.
pub fn args(fx: &Fixture, rest: &[&str]) -> Vec<String> {
    let mut args = target(fx);
    args.extend(rest.iter().map(|arg| (*arg).to_owned()));
    args
}
