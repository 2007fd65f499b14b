//! The examples' stop signal (`examples/common/signal.rs`): SIGTERM, what a container runtime
//! sends, stops a service gracefully as Ctrl-C does, instead of killing the process with its
//! locks still held. The test sends SIGTERM to its own process: the handler must be in place as
//! soon as the helper is called, or the process would die here.

#[path = "../examples/common/signal.rs"]
mod signal;

use std::time::Duration;

/// Nothing resolves it while nobody asks the process to stop; SIGTERM does. (One test: a signal
/// reaches every test of the process.)
#[cfg(unix)]
#[tokio::test]
async fn sigterm_resolves_the_shutdown_signal() {
    let waiting = tokio::time::timeout(Duration::from_millis(200), signal::shutdown_signal()).await;
    assert!(waiting.is_err(), "resolved without a signal");

    let stopping = signal::shutdown_signal();
    let status = std::process::Command::new("kill")
        .args(["-TERM", &std::process::id().to_string()])
        .status()
        .expect("run kill");
    assert!(status.success());
    let stopped = tokio::time::timeout(Duration::from_secs(10), stopping).await;
    assert!(
        stopped.is_ok(),
        "SIGTERM did not resolve the shutdown signal"
    );
}
