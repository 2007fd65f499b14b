//! Work that finishes after its caller stopped waiting: a release sent from `Drop`, the rest of an
//! attempt whose request went away, the masters a quorum verdict no longer needs. One task per
//! manager (its watchdog) runs it all. It imports nothing of the crate.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use futures_util::future::BoxFuture;
use tokio::sync::mpsc;
use tokio::task::JoinSet;

/// One piece of work to finish in the background.
pub(crate) type Work = BoxFuture<'static, ()>;

/// Where a manager finishes work whose caller went away. Cheap to clone.
///
/// Work sent after the running task is gone (its runtime shut down) is dropped: the leases it
/// concerns run out on their own.
#[derive(Debug, Clone)]
pub(crate) struct Background {
    tx: mpsc::UnboundedSender<Work>,
}

/// The receiving end of a [`Background`], read by the task that runs the work.
#[derive(Debug)]
pub(crate) struct BackgroundQueue {
    rx: mpsc::UnboundedReceiver<Work>,
}

impl Background {
    /// A handle and the queue its work arrives in.
    pub(crate) fn new() -> (Background, BackgroundQueue) {
        let (tx, rx) = mpsc::unbounded_channel();
        (Background { tx }, BackgroundQueue { rx })
    }

    /// Finish `work` in the background.
    pub(crate) fn finish(&self, work: impl Future<Output = ()> + Send + 'static) {
        let _ = self.tx.send(Box::pin(work));
    }
}

impl BackgroundQueue {
    /// The next piece of work; `None` once every [`Background`] handle is gone.
    pub(crate) async fn next(&mut self) -> Option<Work> {
        self.rx.recv().await
    }

    /// Run the work in `running` and what arrives meanwhile, until there is none.
    pub(crate) async fn finish_all(&mut self, mut running: JoinSet<()>) {
        loop {
            while let Ok(work) = self.rx.try_recv() {
                running.spawn(work);
            }
            if running.join_next().await.is_none() {
                return;
            }
        }
    }
}

/// What to do with the outcome of a call whose caller went away (e.g. release a lock it took).
pub(crate) type Undo<T> = Box<dyn FnOnce(T) -> Option<Work> + Send>;

/// A call that runs to completion even if its caller goes away: dropped early, the rest of the
/// call is finished in the background, followed by its undo.
pub(crate) struct MustComplete<T: Send + 'static> {
    call: Option<BoxFuture<'static, T>>,
    undo: Option<Undo<T>>,
    background: Background,
}

impl<T: Send + 'static> MustComplete<T> {
    pub(crate) fn new(call: BoxFuture<'static, T>, background: &Background) -> Self {
        MustComplete {
            call: Some(call),
            undo: None,
            background: background.clone(),
        }
    }

    /// Run `undo` on the outcome should the call finish in the background.
    pub(crate) fn with_undo(mut self, undo: Undo<T>) -> Self {
        self.undo = Some(undo);
        self
    }
}

impl<T: Send + 'static> Future for MustComplete<T> {
    type Output = T;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        let Some(call) = self.call.as_mut() else {
            return Poll::Pending; // polled after completion: never resolves twice
        };
        let out = std::task::ready!(call.as_mut().poll(cx));
        self.call = None;
        Poll::Ready(out)
    }
}

impl<T: Send + 'static> Drop for MustComplete<T> {
    fn drop(&mut self) {
        let Some(call) = self.call.take() else {
            return;
        };
        let undo = self.undo.take();
        self.background.finish(async move {
            let out = call.await;
            if let Some(follow_up) = undo.and_then(|undo| undo(out)) {
                follow_up.await;
            }
        });
    }
}
