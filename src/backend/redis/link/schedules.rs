//! The link's caller/reader hand-off under many schedules: three callers send commands on one
//! link (a command, a pipeline of two whose first answer is skipped, two commands in one write,
//! and a release-like command settled in the reader task) to a model server that answers each
//! with its own number, a few bytes at a time, through a pipe that takes less than a command at
//! once.
//!
//! What it covers: `Link::send` (the idle link's caller writing, the busy one's queueing, the
//! deferred write), `writer.rs` (one writer, partial writes, the rest left to the reader),
//! `reader.rs` (answers split across reads, handed out in order, a failure failing everyone), on
//! shuttle's lock and atomics. Asserted: every caller gets the answer to its own command, every
//! settle is called once with its own, and nobody waits for ever; when the server closes the
//! connection after a few answers, every caller still waiting gets an error instead. What it
//! leaves out: the deadline of a settled command (the reader's timer: tokio's clock, which shuttle
//! does not drive), `AUTH`/`SELECT` at opening, and a real socket's errors.

use std::collections::VecDeque;
use std::future::poll_fn;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use redis::{RedisResult, Value};
use shuttle::future::{block_on, spawn, yield_now, JoinHandle};
use tokio::io::{AsyncRead, ReadBuf};
use tokio::sync::Notify;

use super::{reader, Handle, Link, Shared};
use crate::backend::redis::packed::Packed;
use crate::schedules::{explore, finds};
use crate::sync::{AtomicBool, AtomicUsize, Defect, Mutex};

const CALLERS: i64 = 3;
/// What the pipe to the server takes at once: less than one command.
const ROOM: usize = 24;

/// One direction of the connection.
#[derive(Default)]
struct Pipe {
    state: Mutex<PipeState>,
}

#[derive(Default)]
struct PipeState {
    bytes: VecDeque<u8>,
    closed: bool,
    reader: Option<Waker>,
    writer: Option<Waker>,
}

impl Pipe {
    /// Put what fits of `bytes` (all if `room` is `None`): how many went.
    fn put(&self, bytes: &[u8], room: Option<usize>) -> io::Result<usize> {
        let mut state = self.state.lock().unwrap();
        if state.closed {
            return Err(io::ErrorKind::BrokenPipe.into());
        }
        let free = room.map_or(bytes.len(), |room| room.saturating_sub(state.bytes.len()));
        if free == 0 {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        let put = free.min(bytes.len());
        state.bytes.extend(&bytes[..put]);
        state.reader.take().into_iter().for_each(Waker::wake);
        Ok(put)
    }

    /// Take up to `most` bytes; an empty vector at the end; `Pending` until some come.
    fn poll_take(&self, cx: &mut Context<'_>, most: usize) -> Poll<Vec<u8>> {
        let mut state = self.state.lock().unwrap();
        if state.bytes.is_empty() && !state.closed {
            state.reader = Some(cx.waker().clone());
            return Poll::Pending;
        }
        let take = most.min(state.bytes.len());
        let taken = state.bytes.drain(..take).collect();
        state.writer.take().into_iter().for_each(Waker::wake);
        Poll::Ready(taken)
    }

    /// Ready once `room` allows a byte more, or the pipe closed.
    fn poll_room(&self, cx: &mut Context<'_>, room: usize) -> Poll<()> {
        let mut state = self.state.lock().unwrap();
        if state.closed || state.bytes.len() < room {
            return Poll::Ready(());
        }
        state.writer = Some(cx.waker().clone());
        Poll::Pending
    }

    fn close(&self) {
        let mut state = self.state.lock().unwrap();
        state.closed = true;
        state.reader.take().into_iter().for_each(Waker::wake);
        state.writer.take().into_iter().for_each(Waker::wake);
    }
}

/// The link's write half: the pipe to the server.
pub(super) struct OwnedWriteHalf(Arc<Pipe>);

/// The link's read half: the pipe from the server.
pub(super) struct OwnedReadHalf(Arc<Pipe>);

/// No TCP link is opened in the schedule checks.
pub(super) fn split(_: tokio::net::TcpStream) -> (OwnedReadHalf, OwnedWriteHalf) {
    unreachable!("the schedule checks open no TCP connection")
}

impl OwnedWriteHalf {
    pub(super) fn try_write(&self, bytes: &[u8]) -> io::Result<usize> {
        self.0.put(bytes, Some(ROOM))
    }

    pub(super) async fn writable(&self) -> io::Result<()> {
        poll_fn(|cx| self.0.poll_room(cx, ROOM)).await;
        Ok(())
    }
}

impl Drop for OwnedWriteHalf {
    fn drop(&mut self) {
        self.0.close();
    }
}

impl AsyncRead for OwnedReadHalf {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let taken = std::task::ready!(self.0.poll_take(cx, buf.remaining()));
        buf.put_slice(&taken);
        Poll::Ready(Ok(()))
    }
}

/// The model server: answers each `ECHO n` with the integer `n`, three bytes at a time, until
/// the link closes; or, after `answering` answers, closes the connection.
async fn serve(requests: Arc<Pipe>, answers: Arc<Pipe>, answering: usize) {
    let mut got = Vec::new();
    let mut answered = 0;
    loop {
        let more = poll_fn(|cx| requests.poll_take(cx, usize::MAX)).await;
        if more.is_empty() {
            break;
        }
        got.extend(more);
        while let Some((n, used)) = echoed(&got) {
            got.drain(..used);
            if answered == answering {
                requests.close();
                answers.close();
                return;
            }
            for part in format!(":{n}\r\n").as_bytes().chunks(3) {
                answers
                    .put(part, None)
                    .expect("the link reads until the server closes");
                yield_now().await;
            }
            answered += 1;
        }
    }
    answers.close();
}

/// The number of the first whole `ECHO n` command in `bytes`, and its length.
fn echoed(bytes: &[u8]) -> Option<(i64, usize)> {
    let text = std::str::from_utf8(bytes).ok()?;
    let mut lines = text.split("\r\n");
    let header = lines.next()?;
    let parts: Vec<&str> = lines.take(4).collect();
    let [_, "ECHO", _, n] = parts[..] else {
        return None;
    };
    let used = parts.iter().map(|p| p.len() + 2).sum::<usize>() + header.len() + 2;
    if used > bytes.len() {
        return None;
    }
    Some((n.parse().ok()?, used))
}

/// A link over pipes to a model server that closes the connection after `answering` answers:
/// the link, its reader task and the server's.
fn connect(answering: usize) -> (Link, JoinHandle<()>, JoinHandle<()>) {
    let (requests, answers) = (Arc::new(Pipe::default()), Arc::new(Pipe::default()));
    let shared = Arc::new(Shared {
        writer: OwnedWriteHalf(requests.clone()),
        db: 0,
        unanswered: AtomicUsize::new(0),
        open: AtomicBool::new(true),
        outbox: Mutex::default(),
        wake: Notify::new(),
    });
    let reading = spawn(reader::read_answers(
        shared.clone(),
        OwnedReadHalf(answers.clone()),
    ));
    let serving = spawn(serve(requests, answers, answering));
    (Link(Arc::new(Handle(shared))), reading, serving)
}

/// What the settled commands got, by number.
#[derive(Default)]
struct Settled {
    answers: Mutex<Vec<(i64, RedisResult<Value>)>>,
    /// Told at each answer.
    answered: Notify,
}

impl Settled {
    /// Wait until `count` commands are settled; what they got, by number.
    async fn all(&self, count: usize) -> Vec<(i64, RedisResult<Value>)> {
        loop {
            let answered = self.answered.notified();
            tokio::pin!(answered);
            answered.as_mut().enable();
            let mut answers = self.answers.lock().unwrap();
            if answers.len() == count {
                let mut answers = std::mem::take(&mut *answers);
                answers.sort_by_key(|(n, _)| *n);
                return answers;
            }
            drop(answers);
            answered.await;
        }
    }
}

/// Check that the answer to command `n` is `n`, or (`failing`) an error.
fn check(n: i64, answer: RedisResult<Value>, failing: bool) {
    match answer {
        Ok(Value::Int(got)) => assert_eq!(got, n, "command {n} got the answer to command {got}"),
        Ok(other) => panic!("command {n} got {other:?}"),
        Err(err) => assert!(failing, "command {n} failed on a working link: {err}"),
    }
}

/// Caller `c` sends its commands, numbered `10c + 1...`, and checks each answer.
async fn call(link: Link, c: i64, settled: Arc<Settled>, failing: bool) {
    let n = 10 * c;
    let mut echo = redis::cmd("ECHO");
    echo.arg(n + 1);
    check(n + 1, link.query(&echo).await, failing);
    let mut pipeline = redis::pipe();
    pipeline.cmd("ECHO").arg(n + 2).cmd("ECHO").arg(n + 3);
    match link.query_pipeline(&pipeline, 1, 1).await {
        Ok(answers) => check(n + 3, answers.into_iter().next().ok_or_else(none), failing),
        Err(err) => check(n + 3, Err(err), failing),
    }
    let mut packed = Packed::with_capacity(64);
    packed.command("ECHO").arg(n + 4).command("ECHO").arg(n + 5);
    match link.query_packed_all(&packed).await {
        Ok(answers) => {
            let answers = answers
                .into_iter()
                .chain(std::iter::repeat_with(|| Value::Nil));
            for (k, answer) in (4..).zip(answers.take(2)) {
                check(n + k, Ok(answer), failing);
            }
        }
        Err(err) => check(n + 4, Err(err), failing),
    }
    let mut release = Packed::with_capacity(32);
    release.command("ECHO").arg(n + 6);
    let settle = Box::new(move |answer| {
        settled.answers.lock().unwrap().push((n + 6, answer));
        settled.answered.notify_one();
    });
    link.send_packed_then(&release, settle, Duration::MAX);
}

fn none() -> redis::RedisError {
    io::Error::other("no answer").into()
}

/// Three callers on one link to a server that gives `answering` answers, then closes.
fn scenario_with(answering: usize) {
    // the reader makes a timer (tokio's, never started here: no command has a deadline)
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build();
    let _context = runtime.expect("a runtime").enter();
    let failing = answering != usize::MAX;
    block_on(async move {
        let (link, reading, serving) = connect(answering);
        let settled = Arc::new(Settled::default());
        let callers: Vec<_> = (1..=CALLERS)
            .map(|c| spawn(call(link.clone(), c, settled.clone(), failing)))
            .collect();
        for caller in callers {
            caller.await.expect("every caller gets its answers");
        }
        // (a settled command still waiting when the link closes gets an error: not checked here)
        let settled = settled.all(CALLERS as usize).await;
        drop(link);
        reading.await.expect("the reader ends with the link");
        serving.await.expect("the server ends with the link");
        let numbers: Vec<i64> = settled.iter().map(|(n, _)| *n).collect();
        let expected: Vec<i64> = (1..=CALLERS).map(|c| 10 * c + 6).collect();
        assert_eq!(numbers, expected, "every settled command is settled once");
        for (n, answer) in settled {
            check(n, answer, failing);
        }
    });
}

fn scenario() {
    scenario_with(usize::MAX);
}

fn closing_scenario() {
    scenario_with(5);
}

#[test]
fn every_answer_goes_to_its_caller_under_every_schedule_explored() {
    explore(scenario);
}

#[test]
fn a_connection_closed_midway_fails_every_caller_still_waiting() {
    explore(closing_scenario);
}

#[test]
fn an_answer_handed_out_of_turn_is_found() {
    let failure = finds(Defect::AnswerOutOfTurn, scenario);
    assert!(failure.starts_with("command"), "{failure}");
}
