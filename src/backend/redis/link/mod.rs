//! A lean command connection to one Redis server over TCP. On an idle connection a caller writes
//! its command into the socket itself (no hop to another task); on a busy one the reader task
//! writes what came meanwhile in one call (`writer.rs`). A release nobody waits for that finds the
//! link busy goes out with the next command somebody waits for, or with the reader's next write
//! once the tasks ready to run have had their turn: one write, and one read for the server, for
//! several commands. The reader reads the answers and hands each to the caller that waits for
//! it, in the order the commands went. It speaks RESP2 and reads only the short values a lock's
//! commands answer (`resp.rs`).
//!
//! redis-rs's multiplexed connection sends every command through its driver task and reads every
//! answer with a general parser: on the uncontended cycle, whose four plain-path commands answer
//! four values, that task cost the client about twice rslock's whole connection work
//! (BENCHMARKS.md, "Uncontended acquire + release"). TLS and Unix sockets keep redis-rs's connection
//! (`command_conn.rs`).

use std::collections::VecDeque;
use std::io;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use redis::{Cmd, Pipeline, RedisConnectionInfo, RedisError, RedisResult, Value};
use tokio::net::TcpStream;
use tokio::sync::{oneshot, Notify};
use tokio::time::Instant;

use super::packed::Packed;
use crate::sync::{AtomicBool, AtomicUsize, Mutex, MutexGuard};
use socket::OwnedWriteHalf;

mod reader;
mod resp;
#[cfg(all(test, tower_lock_shuttle))]
mod schedules;
mod socket;
mod unsent;
mod waiter;
mod writer;

pub(crate) use unsent::was_not_sent;
pub(crate) use waiter::Settle;
use waiter::{Reply, Waiter};

/// A handle to one connection; clones share it. The connection closes when the last one drops.
#[derive(Clone)]
pub(crate) struct Link(Arc<Handle>);

/// What callers and the reader task share.
struct Shared {
    writer: OwnedWriteHalf,
    /// The database `SELECT`ed when the link opened.
    db: i64,
    /// Commands sent whose callers have not had all their answers.
    unanswered: AtomicUsize,
    /// Cleared once the link failed or closed: the pool then takes another connection before a
    /// command is sent on this one (a server that restarted closed it long ago).
    open: AtomicBool,
    outbox: Mutex<Outbox>,
    /// Wakes the reader: bytes wait to be written, the link failed, or every handle is gone.
    wake: Notify,
}

/// What waits to go out, and who waits for answers.
#[derive(Default)]
struct Outbox {
    /// Bytes not written yet: the writer's next round writes them, or, when the socket is full,
    /// the reader once it takes more.
    unsent: Vec<u8>,
    /// A caller or the reader is writing (`writer.rs`).
    writing: bool,
    /// `unsent` holds only commands nobody waits for (releases sent on a busy link), left for the
    /// reader task to write after the other tasks ready to run have had their turn: their
    /// commands go out in the same write. The next command somebody waits for writes them at
    /// once.
    deferred: bool,
    /// Callers whose commands went (or wait in `unsent`), in order, whose answers the reader has
    /// not yet taken up.
    waiting: VecDeque<Waiter>,
    /// Why the link failed: every later command fails at once with it.
    failed: Option<Failure>,
    /// A waiter has a deadline, which the reader watches (or must start watching).
    timed: bool,
    /// Every handle is gone.
    closed: bool,
}

/// Why a link stopped, as the I/O error every command on it then fails with.
#[derive(Clone, Debug)]
struct Failure(io::ErrorKind, String);

impl Failure {
    fn error(&self) -> RedisError {
        RedisError::from(io::Error::new(self.0, self.1.clone()))
    }
}

impl From<io::Error> for Failure {
    fn from(err: io::Error) -> Self {
        Failure(err.kind(), err.to_string())
    }
}

/// Owns the connection: when the last handle drops, the reader closes it.
struct Handle(Arc<Shared>);

impl Drop for Handle {
    fn drop(&mut self) {
        lock(&self.0.outbox).closed = true;
        self.0.wake.notify_one();
    }
}

fn lock(outbox: &Mutex<Outbox>) -> MutexGuard<'_, Outbox> {
    outbox.lock().unwrap_or_else(|p| p.into_inner())
}

impl Link {
    /// Connect to `host:port`, then log in and select the database as `settings` say, all within
    /// `timeout`.
    pub(crate) async fn open(
        host: &str,
        port: u16,
        settings: &RedisConnectionInfo,
        timeout: Duration,
    ) -> RedisResult<Link> {
        let connecting = async {
            let stream = TcpStream::connect((host, port)).await?;
            // a lock's commands are small and each waits for its answer: none may wait for more
            stream.set_nodelay(true)?;
            let link = Link::over(stream, settings.db());
            link.log_in(settings).await?;
            Ok(link)
        };
        match tokio::time::timeout(timeout, connecting).await {
            Ok(opened) => opened,
            Err(_) => {
                Err(io::Error::new(io::ErrorKind::TimedOut, "connecting to Redis timed out").into())
            }
        }
    }

    /// A link over `stream` to database `db`, and its reader task.
    fn over(stream: TcpStream, db: i64) -> Link {
        let (read, writer) = socket::split(stream);
        let shared = Arc::new(Shared {
            writer,
            db,
            unanswered: AtomicUsize::new(0),
            open: AtomicBool::new(true),
            outbox: Mutex::default(),
            wake: Notify::new(),
        });
        tokio::spawn(reader::read_answers(shared.clone(), read));
        Link(Arc::new(Handle(shared)))
    }

    /// `AUTH` and `SELECT`, as `settings` say (nothing for the default user and database).
    async fn log_in(&self, settings: &RedisConnectionInfo) -> RedisResult<()> {
        let mut commands = redis::pipe();
        if let Some(password) = settings.password() {
            let auth = commands.cmd("AUTH");
            if let Some(user) = settings.username() {
                auth.arg(user);
            }
            auth.arg(password).ignore();
        }
        if settings.db() != 0 {
            commands.cmd("SELECT").arg(settings.db()).ignore();
        }
        if commands.is_empty() {
            return Ok(());
        }
        commands.query_async(&mut self.clone()).await
    }

    /// Whether the link can still carry commands: false once it failed or the server closed it,
    /// which its reader finds as it happens, not when a command is next sent.
    pub(crate) fn is_open(&self) -> bool {
        self.0 .0.open.load(Ordering::Relaxed)
    }

    /// Send `cmd` and wait for its answer (a server's error answer is a value).
    pub(crate) async fn query(&self, cmd: &Cmd) -> RedisResult<Value> {
        self.ask_one(|out| cmd.write_packed_command(out)).await
    }

    /// Send `packed`, one command, and wait for its answer (a server's error answer is a value).
    pub(crate) async fn query_packed(&self, packed: &Packed) -> RedisResult<Value> {
        debug_assert_eq!(packed.len(), 1, "one command");
        self.ask_one(|out| out.extend_from_slice(packed.bytes()))
            .await
    }

    /// Send `packed`, one command, and have `settle` take its answer (or the link's failure) in
    /// the reader task; or a timeout error once `timeout` has passed without an answer, as a
    /// caller's timer would give it. A caller that does not wait for the answer (a release from
    /// `Drop`) then needs no task of its own to wait in.
    pub(crate) fn send_packed_then(&self, packed: &Packed, settle: Settle, timeout: Duration) {
        debug_assert_eq!(packed.len(), 1, "one command");
        let waiter = Waiter {
            skip: 0,
            count: 1,
            values: Vec::new(),
            reply: Reply::Settle(settle),
            // none for a timeout too long to count (`Duration::MAX`: never)
            deadline: Instant::now().checked_add(timeout),
        };
        // a failed link has settled it already
        let _ = self.send(
            |out| out.extend_from_slice(packed.bytes()),
            waiter,
            Write::Deferred,
        );
    }

    /// Send the commands of `packed` in one write, and wait for all their answers.
    pub(crate) async fn query_packed_all(&self, packed: &Packed) -> RedisResult<Vec<Value>> {
        let write = |out: &mut Vec<u8>| out.extend_from_slice(packed.bytes());
        self.ask_many(write, 0, packed.len()).await
    }

    /// Send the commands of `pipeline` in one write; skip `offset` answers and return the `count`
    /// after them.
    pub(crate) async fn query_pipeline(
        &self,
        pipeline: &Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisResult<Vec<Value>> {
        let write = |out: &mut Vec<u8>| write_pipeline(pipeline, out);
        self.ask_many(write, offset, count).await
    }

    /// Send the command `write` writes, and wait for its answer.
    async fn ask_one(&self, write: impl FnOnce(&mut Vec<u8>)) -> RedisResult<Value> {
        let (reply, answer) = oneshot::channel();
        let waiter = Waiter {
            skip: 0,
            count: 1,
            values: Vec::new(),
            reply: Reply::One(reply),
            deadline: None,
        };
        self.send(write, waiter, Write::Now)?;
        answer.await.unwrap_or_else(|_| Err(stopped()))
    }

    /// Send the commands `write` writes; skip `skip` answers and return the `count` after them.
    async fn ask_many(
        &self,
        write: impl FnOnce(&mut Vec<u8>),
        skip: usize,
        count: usize,
    ) -> RedisResult<Vec<Value>> {
        if skip + count == 0 {
            return Ok(Vec::new());
        }
        let (reply, answer) = oneshot::channel();
        let waiter = Waiter {
            skip,
            count,
            values: Vec::with_capacity(count),
            reply: Reply::Many(reply),
            deadline: None,
        };
        self.send(write, waiter, Write::Now)?;
        answer.await.unwrap_or_else(|_| Err(stopped()))
    }

    /// Queue `waiter` and write its command: at once on an idle link; else the writer of the
    /// moment or the reader task writes it, with the commands that come meanwhile. A command
    /// nobody waits for ([`Write::Deferred`]) on a busy link waits for the reader's deferred
    /// write. Fails at once on a failed link, the waiter with it.
    ///
    /// A lone command goes out without a hop to another task. On a busy link a system call per
    /// command would cost more than the hop: the reader task writes whatever came by the time it
    /// runs, in one call. A waiter with a deadline wakes the reader only when it watches none.
    /// A command refused by a failed link fails with an error that says it was not sent
    /// ([`was_not_sent`]).
    fn send(
        &self,
        write: impl FnOnce(&mut Vec<u8>),
        waiter: Waiter,
        when: Write,
    ) -> RedisResult<()> {
        let shared = &self.0 .0;
        let mut outbox = lock(&shared.outbox);
        if let Some(failure) = outbox.failed.clone() {
            drop(outbox);
            shared.open.store(false, Ordering::Relaxed);
            let err = failure.not_sent();
            waiter.fail_with(&err);
            return Err(err);
        }
        let watch = waiter.deadline.is_some() && !std::mem::replace(&mut outbox.timed, true);
        outbox.waiting.push_back(waiter);
        let busy = shared.unanswered.fetch_add(1, Ordering::Relaxed) > 0;
        let bytes_wait = !outbox.unsent.is_empty();
        write(&mut outbox.unsent);
        let wake = if outbox.writing || (bytes_wait && !outbox.deferred) {
            // written after the bytes ahead of it, by whoever writes those
            drop(outbox);
            false
        } else if when == Write::Deferred && (busy || outbox.deferred) {
            // On a busy link the reader writes it once the other ready tasks have run, woken once
            // for them all. On an idle one it goes now: the drop that sends it may be the last
            // thing its runtime runs.
            let first = !std::mem::replace(&mut outbox.deferred, true);
            drop(outbox);
            first
        } else if busy && !bytes_wait {
            drop(outbox);
            true
        } else {
            // an idle link, or deferred commands: this caller writes them with its own
            !writer::write_out(shared, outbox)
        };
        if wake || watch {
            shared.wake.notify_one();
        }
        Ok(())
    }
}

/// When [`Link::send`] writes a command.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Write {
    /// At once, or with the commands of other callers who wait: somebody waits for its answer.
    Now,
    /// On a busy link, after the tasks ready to run have had their turn: nobody waits for its
    /// answer.
    Deferred,
}

/// The commands of `pipeline`, in a transaction if it is one.
fn write_pipeline(pipeline: &Pipeline, out: &mut Vec<u8>) {
    if pipeline.is_transaction() {
        redis::cmd("MULTI").write_packed_command(out);
    }
    for cmd in pipeline.cmd_iter() {
        cmd.write_packed_command(out);
    }
    if pipeline.is_transaction() {
        redis::cmd("EXEC").write_packed_command(out);
    }
}

fn stopped() -> RedisError {
    io::Error::new(io::ErrorKind::BrokenPipe, "the connection's reader stopped").into()
}

impl redis::aio::ConnectionLike for Link {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> redis::RedisFuture<'a, Value> {
        Box::pin(self.query(cmd))
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> redis::RedisFuture<'a, Vec<Value>> {
        Box::pin(self.query_pipeline(pipeline, offset, count))
    }

    fn get_db(&self) -> i64 {
        self.0 .0.db
    }
}
