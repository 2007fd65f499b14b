//! The manager's watchdog task: spawned on first use (so that `LockManager::memory()` needs no
//! runtime), and stopped by the shutdown once its background work is done.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::background::BackgroundQueue;
use crate::watchdog::Watchdog;

/// The watchdog of one manager, before and after it is spawned.
#[derive(Debug)]
pub(crate) struct WatchdogTask {
    state: Mutex<State>,
    started: AtomicBool,
}

#[derive(Debug)]
struct State {
    /// The watchdog and the background work it runs, until it is spawned.
    unstarted: Option<(Watchdog, BackgroundQueue)>,
    /// Tells the watchdog to finish its background work and end.
    stop: Option<oneshot::Sender<()>>,
    /// The spawned task.
    task: Option<JoinHandle<()>>,
}

impl WatchdogTask {
    /// `watchdog` runs the work sent to `background`, and ends once `stop` fires (or is dropped).
    pub(crate) fn new(
        watchdog: Watchdog,
        background: BackgroundQueue,
        stop: oneshot::Sender<()>,
    ) -> Self {
        let state = State {
            unstarted: Some((watchdog, background)),
            stop: Some(stop),
            task: None,
        };
        WatchdogTask {
            state: Mutex::new(state),
            started: AtomicBool::new(false),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // every user leaves the state consistent before it could panic
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Spawn the watchdog, inside the caller's runtime, unless it runs already.
    pub(crate) fn start(&self) {
        if self.started.load(Ordering::Acquire) {
            return;
        }
        let mut state = self.state();
        if let Some((watchdog, background)) = state.unstarted.take() {
            state.task = Some(tokio::spawn(watchdog.run(background)));
        }
        self.started.store(true, Ordering::Release);
    }

    /// Stop the watchdog once the background work sent so far is done (waiting at most `limit`).
    /// A watchdog never spawned is dropped.
    pub(crate) async fn stop(&self, limit: Duration) {
        let (stop, task) = {
            let mut state = self.state();
            drop(state.unstarted.take());
            (state.stop.take(), state.task.take())
        };
        if let Some(stop) = stop {
            let _ = stop.send(());
        }
        let Some(task) = task else {
            return;
        };
        if tokio::time::timeout(limit, task).await.is_err() {
            tracing::warn!(
                "shutdown: background work still running after {limit:?}; left to finish"
            );
        }
    }
}
