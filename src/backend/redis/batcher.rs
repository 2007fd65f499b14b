//! The command batcher of one pooled connection: commands handed in while the connection's sender
//! waits for its turn on the runtime go to Redis together, as one pipeline and one write.
//! redis-rs's own connection writes whenever its queue runs empty, which on a busy process happens
//! every few commands. Every write is a system call on both sides of the socket (BENCHMARKS.md,
//! "Many keys").
//!
//! Batching costs a command a hop to the sender task and a turn of the scheduler, so a command
//! goes straight to the connection while little is out on it (a lone release that hands a lock
//! on is not held back); once many are out, the next ones wait for the sender, which takes them in
//! the order they came. A command handed in after another one's reply reaches Redis after it,
//! whichever way either went. Every caller waits for its own reply only: dropping the wait (a
//! timeout, a cancelled request) loses nothing of anybody else's.
//!
//! A link (`link/`) batches by itself what comes while it is busy: its commands go to it at once.

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::task::Poll;

use futures_util::future::BoxFuture;
use futures_util::stream::{FuturesUnordered, StreamExt};
use redis::aio::ConnectionLike;
use redis::{Cmd, RedisError, RedisResult, Value};
use tokio::sync::{oneshot, Notify};

use super::command_conn::CommandConn;
use super::link::Link;
use super::packed::Packed;

type Reply = oneshot::Sender<RedisResult<Value>>;

/// The commands waiting for the next batch.
#[derive(Default)]
struct NextBatch {
    commands: Mutex<Vec<(Cmd, Reply)>>,
}

/// Where callers leave commands for one connection.
pub(crate) struct CommandBatcher {
    conn: CommandConn,
    waiting: Arc<NextBatch>,
    /// Commands sent and not answered yet.
    unanswered: Arc<AtomicUsize>,
    /// Wakes the sender: a command waits, or the batcher is gone.
    wake: Arc<Notify>,
}

impl Drop for CommandBatcher {
    fn drop(&mut self) {
        // The sender holds the waiting list weakly: woken, it finds it gone and ends.
        self.wake.notify_one();
    }
}

impl CommandBatcher {
    /// A batcher for `conn`, and its sender task (spawned on the current runtime). A link batches
    /// its commands itself (`link/writer.rs`): they go to it at once, and it needs no sender.
    pub(crate) fn new(conn: CommandConn) -> Self {
        let waiting = Arc::new(NextBatch::default());
        let unanswered = Arc::new(AtomicUsize::new(0));
        let wake = Arc::new(Notify::new());
        if let CommandConn::Multiplexed(_) = conn {
            tokio::spawn(send_batches(
                conn.clone(),
                Arc::downgrade(&waiting),
                unanswered.clone(),
                wake.clone(),
            ));
        }
        CommandBatcher {
            conn,
            waiting,
            unanswered,
            wake,
        }
    }

    /// The connection, when it is a link (which batches by itself).
    pub(crate) fn link(&self) -> Option<&Link> {
        match &self.conn {
            CommandConn::Link(link) => Some(link),
            CommandConn::Multiplexed(_) => None,
        }
    }

    /// Whether the connection can still carry commands: a link knows when it failed or the server
    /// closed it; redis-rs's connection tells only by failing a command.
    pub(crate) fn is_open(&self) -> bool {
        match &self.conn {
            CommandConn::Link(link) => link.is_open(),
            CommandConn::Multiplexed(_) => true,
        }
    }

    /// The connection itself, for what does not go through the batcher (loading a script).
    pub(crate) fn connection(&self) -> CommandConn {
        self.conn.clone()
    }

    /// Send `packed`, one command, and wait for its reply.
    pub(crate) async fn send_packed(&self, packed: &Packed) -> RedisResult<Value> {
        match &self.conn {
            CommandConn::Link(link) => link.query_packed(packed).await,
            CommandConn::Multiplexed(_) => self.send(&packed.cmds()[0]).await,
        }
    }

    /// Send the commands of `packed` in one write, and wait for their replies.
    pub(crate) async fn send_packed_all(&self, packed: &Packed) -> RedisResult<Vec<Value>> {
        match &self.conn {
            CommandConn::Link(link) => link.query_packed_all(packed).await,
            CommandConn::Multiplexed(conn) => {
                let pipe = packed.pipeline();
                conn.clone().req_packed_commands(&pipe, 0, pipe.len()).await
            }
        }
    }

    /// Send `cmd` and wait for its reply: at once while the connection is not busy, else with the
    /// next batch (on a link, at once: it batches what comes while it is busy).
    pub(crate) async fn send(&self, cmd: &Cmd) -> RedisResult<Value> {
        if let CommandConn::Link(link) = &self.conn {
            return link.query(cmd).await;
        }
        // None: nothing waits for the sender and little is out, so going through the sender would
        // only add a hop between tasks to this command's way: it goes at once.
        let queued = {
            let mut commands = lock(&self.waiting.commands);
            if commands.is_empty() && self.unanswered.load(Ordering::Relaxed) < BUSY {
                None
            } else {
                let (reply, answer) = oneshot::channel();
                commands.push((cmd.clone(), reply));
                Some((commands.len() == 1, answer))
            }
        };
        let Some((first, answer)) = queued else {
            self.unanswered.fetch_add(1, Ordering::Relaxed);
            let _answered = Answered(self.unanswered.clone(), 1);
            return self.conn.query(cmd).await;
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

/// With this many commands out and unanswered, the sender lets the other ready tasks run before it
/// takes a batch, so that theirs join it: the connection is busy, and a command waiting one more
/// turn of the scheduler costs little beside the replies ahead of it. With fewer out, it sends
/// what waits at once: a lone request (a release that hands a lock on) is not held back.
const BUSY: usize = 16;

/// The sender: take what waits, send it as one batch, and go on while its replies are out.
async fn send_batches(
    conn: CommandConn,
    waiting: Weak<NextBatch>,
    unanswered: Arc<AtomicUsize>,
    wake: Arc<Notify>,
) {
    let mut in_flight: FuturesUnordered<BoxFuture<'static, ()>> = FuturesUnordered::new();
    loop {
        tokio::select! {
            _ = wake.notified() => {}
            Some(()) = in_flight.next(), if !in_flight.is_empty() => continue,
        }
        if unanswered.load(Ordering::Relaxed) >= BUSY {
            tokio::task::yield_now().await;
        }
        let Some(waiting) = waiting.upgrade() else {
            break;
        };
        let batch = std::mem::take(&mut *lock(&waiting.commands));
        drop(waiting);
        if batch.is_empty() {
            continue;
        }
        unanswered.fetch_add(batch.len(), Ordering::Relaxed);
        let mut batch = Box::pin(send_batch(conn.clone(), batch, unanswered.clone()));
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
async fn send_batch(mut conn: CommandConn, batch: Vec<(Cmd, Reply)>, unanswered: Arc<AtomicUsize>) {
    let count = batch.len();
    let _answered = Answered(unanswered, count);
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
async fn send(conn: &mut CommandConn, pipe: &redis::Pipeline) -> RedisResult<Vec<Value>> {
    match pipe.cmd_iter().next() {
        Some(cmd) if pipe.len() == 1 => conn.req_packed_command(cmd).await.map(|value| vec![value]),
        _ => conn.req_packed_commands(pipe, 0, pipe.len()).await,
    }
}

/// Counts a batch's commands as answered when the batch ends, however it ends.
struct Answered(Arc<AtomicUsize>, usize);

impl Drop for Answered {
    fn drop(&mut self) {
        self.0.fetch_sub(self.1, Ordering::Relaxed);
    }
}
