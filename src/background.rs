//! Work that finishes after its caller stopped waiting: a release sent from `Drop`, the rest of an
//! attempt whose request went away, the masters a quorum verdict no longer needs. One task per
//! manager, started by its watchdog, runs it all, and at the end waits for the work that runs
//! outside it (a release whose answer the connection's reader settles). It imports nothing of the
//! crate.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use futures_util::future::{BoxFuture, CatchUnwind, FutureExt};
use futures_util::stream::{FuturesUnordered, StreamExt};
use tokio::sync::{mpsc, oneshot, Notify};

/// One piece of work to finish in the background.
pub(crate) type Work = BoxFuture<'static, ()>;

/// Where a manager finishes work whose caller went away. Cheap to clone.
///
/// Work sent after the running task is gone (its runtime shut down) is dropped: the leases it
/// concerns run out on their own.
#[derive(Debug, Clone)]
pub(crate) struct Background {
    tx: mpsc::UnboundedSender<Work>,
    outside: Arc<OutsideCount>,
}

/// The receiving end of a [`Background`], read by the task that runs the work.
#[derive(Debug)]
pub(crate) struct BackgroundQueue {
    rx: mpsc::UnboundedReceiver<Work>,
    outside: Arc<OutsideCount>,
}

/// How many pieces of work run outside the queue, and the signal that the last one ended.
#[derive(Debug, Default)]
struct OutsideCount {
    running: AtomicUsize,
    none_left: Notify,
}

/// One piece of work that runs outside the queue (a release the connection's reader settles):
/// the queue's end waits for it until it is dropped. It is a handle to the queue as well, for the
/// rest of that work.
#[derive(Debug)]
pub(crate) struct Outside(Background);

impl Outside {
    /// The queue, for what the work leaves to finish in the background.
    pub(crate) fn background(&self) -> &Background {
        &self.0
    }
}

impl Drop for Outside {
    fn drop(&mut self) {
        let count = &self.0.outside;
        if count.running.fetch_sub(1, Ordering::AcqRel) == 1 {
            count.none_left.notify_waiters();
        }
    }
}

impl Background {
    /// A handle and the queue its work arrives in.
    pub(crate) fn new() -> (Background, BackgroundQueue) {
        let (tx, rx) = mpsc::unbounded_channel();
        let outside = Arc::new(OutsideCount::default());
        let queue = BackgroundQueue {
            rx,
            outside: outside.clone(),
        };
        (Background { tx, outside }, queue)
    }

    /// Finish `work` in the background.
    pub(crate) fn finish(&self, work: impl Future<Output = ()> + Send + 'static) {
        let _ = self.tx.send(Box::pin(work));
    }

    /// Count one piece of work that runs outside the queue, until the mark is dropped. Work it
    /// sends here before that is finished too.
    pub(crate) fn outside(&self) -> Outside {
        self.outside.running.fetch_add(1, Ordering::AcqRel);
        Outside(self.clone())
    }
}

impl BackgroundQueue {
    /// Run the work sent, until every [`Background`] handle is gone or `stopped` fires; then
    /// finish the work in flight and what arrives meanwhile.
    pub(crate) async fn run(mut self, mut stopped: oneshot::Receiver<()>) {
        let mut running = Running::default();
        loop {
            tokio::select! {
                next = self.rx.recv() => match next {
                    Some(work) => running.start(work),
                    None => break,
                },
                _ = running.one_done(), if !running.is_empty() => {}
                _ = &mut stopped => break,
            }
        }
        self.finish_all(running).await;
    }

    /// Run the work in `running` and what arrives meanwhile, until there is none, here or
    /// outside the queue.
    async fn finish_all(&mut self, mut running: Running) {
        loop {
            while let Ok(work) = self.rx.try_recv() {
                running.start(work);
            }
            if !running.is_empty() {
                running.one_done().await;
                continue;
            }
            let none_left = self.outside.none_left.notified();
            tokio::pin!(none_left);
            none_left.as_mut().enable();
            if self.outside.running.load(Ordering::Acquire) == 0 {
                if self.rx.is_empty() {
                    return;
                }
                continue;
            }
            // work outside may send its rest here before it ends (and ends only with that rest)
            tokio::select! {
                () = &mut none_left => {}
                Some(work) = self.rx.recv() => running.start(work),
            }
        }
    }
}

/// The background work in flight, polled by the task that reads the queue rather than spawned as
/// tasks of its own: a task per release cost the scheduler about 3,000 instructions, a third of
/// what the release itself costs the client.
#[derive(Default)]
struct Running(FuturesUnordered<CatchUnwind<AssertUnwindSafe<Work>>>);

impl Running {
    /// Start `work`. A panic in it ends that work only, not the task running the rest.
    fn start(&mut self, work: Work) {
        self.0.push(AssertUnwindSafe(work).catch_unwind());
    }

    /// True when nothing runs.
    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Run the work until one piece of it ends (at once when there is none).
    async fn one_done(&mut self) {
        if let Some(Err(_)) = self.0.next().await {
            tracing::error!("a piece of background work panicked; the rest goes on");
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

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_panic_ends_its_own_work_and_not_the_rest() {
        let mut running = Running::default();
        let (sent, received) = oneshot::channel();
        running.start(Box::pin(async {
            panic!("a piece of background work fails")
        }));
        running.start(Box::pin(async move {
            tokio::task::yield_now().await;
            let _ = sent.send("done");
        }));
        running.one_done().await;
        running.one_done().await;
        assert!(running.is_empty());
        assert_eq!(received.await, Ok("done"));
    }

    #[tokio::test]
    async fn finish_all_runs_what_arrives_while_it_runs() {
        let (background, mut queue) = Background::new();
        let (sent, mut received) = oneshot::channel();
        let later = background.clone();
        let mut running = Running::default();
        running.start(Box::pin(async move {
            tokio::task::yield_now().await;
            later.finish(async move {
                let _ = sent.send("done");
            });
        }));
        drop(background);
        queue.finish_all(running).await;
        assert_eq!(received.try_recv(), Ok("done"));
    }

    #[tokio::test]
    async fn finish_all_waits_for_the_work_outside_the_queue() {
        let (background, mut queue) = Background::new();
        let outside = background.outside();
        let (sent, mut received) = oneshot::channel();
        tokio::spawn(async move {
            tokio::task::yield_now().await;
            // what the work outside sends before it ends is finished too
            background.finish(async move {
                let _ = sent.send("done");
            });
            drop(outside);
        });
        queue.finish_all(Running::default()).await;
        assert_eq!(received.try_recv(), Ok("done"));
    }

    #[tokio::test]
    async fn finish_all_runs_the_rest_that_carries_its_outside_mark() {
        let (background, mut queue) = Background::new();
        let outside = background.outside();
        drop(background);
        let (sent, mut received) = oneshot::channel();
        tokio::spawn(async move {
            tokio::task::yield_now().await;
            // the mark ends only with the rest it sends (a release whose answer asks for more)
            let rest = outside.background().clone();
            rest.finish(async move {
                let _ = sent.send("done");
                drop(outside);
            });
        });
        let finished = tokio::time::timeout(std::time::Duration::from_secs(5), async {
            queue.finish_all(Running::default()).await;
        });
        assert!(finished.await.is_ok(), "the queue's end waited for nothing");
        assert_eq!(received.try_recv(), Ok("done"));
    }
}
