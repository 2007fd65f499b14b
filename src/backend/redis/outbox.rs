//! The outbox of one pooled connection: commands handed in while the connection's sender waits
//! for its turn on the runtime go to Redis together, as one pipeline and one write. redis-rs's
//! own connection writes whenever its queue runs empty, which on a busy process is every two or
//! three commands, and every write is a system call on both sides of the socket.
//!
//! One sender task per connection takes the waiting commands in the order they came, so the
//! commands of one lock reach Redis in the order they were handed in, as before. Every caller
//! waits for its own reply only: dropping the wait (a timeout, a cancelled request) loses nothing
//! of anybody else's.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, Weak};
use std::task::Poll;

use futures_util::stream::{FuturesUnordered, StreamExt};
use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::{Cmd, RedisError, RedisResult, Value};
use tokio::sync::{oneshot, Notify};

type Reply = oneshot::Sender<RedisResult<Value>>;

/// The commands waiting for the next batch.
#[derive(Default)]
struct Waiting {
    commands: Mutex<Vec<(Cmd, Reply)>>,
}

/// Where callers leave commands for one connection.
pub(crate) struct Outbox {
    waiting: Arc<Waiting>,
    /// Wakes the sender: a command waits, or the outbox is gone.
    wake: Arc<Notify>,
}

impl Drop for Outbox {
    fn drop(&mut self) {
        // The sender holds the waiting list weakly: woken, it finds it gone and ends.
        self.wake.notify_one();
    }
}

impl Outbox {
    /// An outbox for `conn`, and its sender task (spawned on the current runtime).
    pub(crate) fn new(conn: MultiplexedConnection) -> Self {
        let waiting = Arc::new(Waiting::default());
        let wake = Arc::new(Notify::new());
        tokio::spawn(send_batches(conn, Arc::downgrade(&waiting), wake.clone()));
        Outbox { waiting, wake }
    }

    /// Send `cmd` with the next batch and wait for its reply.
    pub(crate) async fn send(&self, cmd: Cmd) -> RedisResult<Value> {
        let (reply, answer) = oneshot::channel();
        let first = {
            let mut commands = lock(&self.waiting.commands);
            commands.push((cmd, reply));
            commands.len() == 1
        };
        if first {
            self.wake.notify_one();
        }
        answer.await.unwrap_or_else(|_| {
            Err(RedisError::from(std::io::Error::new(
                std::io::ErrorKind::BrokenPipe,
                "the connection's sender stopped",
            )))
        })
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

type InFlight = Pin<Box<dyn Future<Output = ()> + Send>>;

/// The sender: take what waits, send it as one batch, and go on while its replies are out.
async fn send_batches(conn: MultiplexedConnection, waiting: Weak<Waiting>, wake: Arc<Notify>) {
    let mut in_flight: FuturesUnordered<InFlight> = FuturesUnordered::new();
    loop {
        tokio::select! {
            _ = wake.notified() => {}
            Some(()) = in_flight.next(), if !in_flight.is_empty() => continue,
        }
        // Let the tasks that are ready to run now add their commands to this batch.
        tokio::task::yield_now().await;
        let Some(waiting) = waiting.upgrade() else {
            break;
        };
        let batch = std::mem::take(&mut *lock(&waiting.commands));
        drop(waiting);
        if batch.is_empty() {
            continue;
        }
        let mut batch = Box::pin(send_batch(conn.clone(), batch));
        // Polled once here, the batch enters the connection's queue before the next one is taken.
        let sent = std::future::poll_fn(|cx| Poll::Ready(batch.as_mut().poll(cx))).await;
        if sent.is_pending() {
            in_flight.push(batch);
        }
    }
    // Replies still out are delivered before the sender ends.
    while in_flight.next().await.is_some() {}
}

/// Send `batch` and hand each caller its reply. Once every caller has stopped waiting (a server
/// that froze), the batch lets go of the connection instead of waiting on.
async fn send_batch(mut conn: MultiplexedConnection, batch: Vec<(Cmd, Reply)>) {
    let mut pipe = redis::Pipeline::with_capacity(batch.len());
    let mut replies = Vec::with_capacity(batch.len());
    for (cmd, reply) in batch {
        pipe.add_command(cmd);
        replies.push(reply);
    }
    let everyone_left = async {
        for reply in &mut replies {
            reply.closed().await;
        }
    };
    let answer = tokio::select! {
        answer = send(&mut conn, &pipe) => answer,
        () = everyone_left => return,
    };
    match answer {
        Ok(values) => {
            for (value, reply) in values.into_iter().zip(replies) {
                // a server's error answer stays a value, as it is for a single command
                let _ = reply.send(Ok(value));
            }
        }
        Err(err) => {
            // Every caller gets the failure; an I/O error, so that each marks the connection
            // broken as it would have on its own.
            for reply in replies {
                let _ = reply.send(Err(RedisError::from(std::io::Error::other(
                    err.to_string(),
                ))));
            }
        }
    }
}

/// One command alone, several as a pipeline: their answers in order.
async fn send(conn: &mut MultiplexedConnection, pipe: &redis::Pipeline) -> RedisResult<Vec<Value>> {
    match pipe.cmd_iter().next() {
        Some(cmd) if pipe.len() == 1 => conn.req_packed_command(cmd).await.map(|value| vec![value]),
        _ => conn.req_packed_commands(pipe, 0, pipe.len()).await,
    }
}
