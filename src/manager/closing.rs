//! Closing a manager: once closed it starts no acquisition, and it can tell when the acquisitions
//! that were running have all ended, and its schedules of run-once jobs when it closed.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use tokio::sync::Notify;

/// Whether the manager is closed, and how many acquisitions are running.
#[derive(Debug, Default)]
pub(crate) struct Closing {
    closed: AtomicBool,
    running: AtomicUsize,
    /// Told when the last running acquisition of a closed manager ends.
    ended: Notify,
    /// Told when the manager closes.
    closed_now: Notify,
}

/// One running acquisition: counted until dropped.
pub(crate) struct Running<'a>(&'a Closing);

impl Closing {
    /// Count an acquisition as running; `None` once the manager is closed.
    pub(crate) fn enter(&self) -> Option<Running<'_>> {
        // Counted before the check: a `close` that this check misses sees the count, and waits.
        self.running.fetch_add(1, Ordering::SeqCst);
        let running = Running(self);
        (!self.is_closed()).then_some(running)
    }

    /// Close: true for the first call only.
    pub(crate) fn close(&self) -> bool {
        let first = !self.closed.swap(true, Ordering::SeqCst);
        if first {
            self.closed_now.notify_waiters();
        }
        first
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }

    /// Resolves once the manager is closed.
    pub(crate) async fn closed(&self) {
        let told = self.closed_now.notified();
        tokio::pin!(told);
        // Enabled before the check: a `close` after it is told to this waiter.
        told.as_mut().enable();
        if !self.is_closed() {
            told.await;
        }
    }

    /// Resolves once no acquisition is running.
    pub(crate) async fn ended(&self) {
        loop {
            let told = self.ended.notified();
            tokio::pin!(told);
            told.as_mut().enable();
            if self.running.load(Ordering::SeqCst) == 0 {
                return;
            }
            told.await;
        }
    }
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        let closing = self.0;
        if closing.running.fetch_sub(1, Ordering::SeqCst) == 1 && closing.is_closed() {
            closing.ended.notify_waiters();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn closing_refuses_new_acquisitions_and_waits_for_the_running_ones() {
        let closing = Closing::default();
        let running = closing.enter().expect("open");
        assert!(closing.close());
        assert!(!closing.close(), "closes once");
        assert!(closing.enter().is_none());
        let ended = closing.ended();
        tokio::pin!(ended);
        let waited = tokio::time::timeout(Duration::from_millis(20), ended.as_mut()).await;
        assert!(waited.is_err(), "ended while an acquisition runs");
        drop(running);
        ended.await;
    }

    #[tokio::test]
    async fn closed_resolves_on_close_and_after_it() {
        let closing = std::sync::Arc::new(Closing::default());
        let waiting = tokio::spawn({
            let closing = closing.clone();
            async move { closing.closed().await }
        });
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished(), "closed before the close");
        closing.close();
        waiting.await.expect("told of the close");
        closing.closed().await; // a late waiter returns at once
    }
}
