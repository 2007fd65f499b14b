//! Stopping a service the way its platform asks: Ctrl-C (SIGINT) in a terminal, SIGTERM from a
//! container runtime or a process supervisor (`docker stop`, Kubernetes, systemd).

use std::future::Future;

/// Resolves when the process is asked to stop: Ctrl-C, or SIGTERM on Unix.
///
/// The SIGTERM handler is installed when this is called, not when the future is first polled: a
/// SIGTERM that arrives in between is then a graceful stop too, not the default action (the
/// process killed at once, without releasing its locks).
pub fn shutdown_signal() -> impl Future<Output = ()> + Send + 'static {
    #[cfg(unix)]
    let terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate());
    async move {
        #[cfg(unix)]
        let terminate = async move {
            match terminate {
                Ok(mut terminate) => drop(terminate.recv().await),
                // no handler: only Ctrl-C stops the process gracefully
                Err(_) => std::future::pending().await,
            }
        };
        #[cfg(not(unix))]
        let terminate = std::future::pending::<()>();
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = terminate => {}
        }
    }
}
