//! A link's reader task: it reads the answers and hands each to its caller, writes what the socket
//! did not take at once, gives a settled command that waited past its deadline a timeout, and
//! fails every caller still waiting when the connection fails or closes.

use std::collections::VecDeque;
use std::io;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use redis::{RedisError, Value};
use tokio::io::AsyncReadExt;
use tokio::time::{Instant, Sleep};

use super::socket::OwnedReadHalf;
use super::{lock, resp, writer, Failure, Outbox, Settle, Shared, Waiter};
use crate::sync::{seeded, Defect};

/// Room made in the read buffer before each read: a lock's answers are short.
const CHUNK: usize = 8 * 1024;

/// Run the link over `read` until it fails or its last handle drops.
pub(super) async fn read_answers(shared: Arc<Shared>, mut read: OwnedReadHalf) {
    // callers whose answers are being read, taken from the outbox when the last one is answered
    let mut reading = VecDeque::new();
    let why = match run(&shared, &mut read, &mut reading).await {
        Ok(()) => Failure(
            io::ErrorKind::BrokenPipe,
            "the connection was closed".into(),
        ),
        Err(failure) => failure,
    };
    let (waiting, why) = {
        let mut outbox = lock(&shared.outbox);
        let why = outbox.failed.get_or_insert(why).clone();
        outbox.unsent = Vec::new();
        (std::mem::take(&mut outbox.waiting), why)
    };
    // after the failure is set: a command sent meanwhile fails as one not sent
    shared.open.store(false, Ordering::Relaxed);
    for waiter in reading.into_iter().chain(waiting) {
        waiter.fail(&why);
    }
}

async fn run(
    shared: &Shared,
    read: &mut OwnedReadHalf,
    reading: &mut VecDeque<Waiter>,
) -> Result<(), Failure> {
    let mut answers = Vec::with_capacity(CHUNK);
    // the deadline watched, when a settled command waits
    let timer = tokio::time::sleep(std::time::Duration::ZERO);
    tokio::pin!(timer);
    let mut watching = false;
    // the reader let the other tasks run before it writes what was left for later
    let mut yielded = false;
    loop {
        let unsent = match next_round(shared, reading, timer.as_mut(), &mut watching, &mut yielded)
        {
            Round::Stop(outcome) => return outcome,
            Round::Yield => {
                // their commands, and the releases their requests make, go out in the same write
                tokio::task::yield_now().await;
                continue;
            }
            Round::Select { unsent } => unsent,
        };
        answers.reserve(CHUNK);
        tokio::select! {
            biased;
            got = read.read_buf(&mut answers) => {
                if got? == 0 {
                    // the words a write on the closed connection would have got (EPIPE)
                    let why = "Redis closed the connection (broken pipe)".into();
                    return Err(Failure(io::ErrorKind::BrokenPipe, why));
                }
                take_answers(shared, &mut answers, reading)?;
            }
            writable = shared.writer.writable(), if unsent => {
                writable?;
                let outbox = lock(&shared.outbox);
                if !outbox.writing && !outbox.unsent.is_empty() {
                    writer::write_out(shared, outbox);
                }
            }
            () = &mut timer, if watching => {
                watching = false;
                expire_overdue(shared, reading);
            }
            // last: sends on a busy link wake the reader often, and must not hold off the timer
            () = shared.wake.notified() => {}
        }
    }
}

/// What the reader does next, as the outbox says.
enum Round {
    /// The link failed, or every handle is gone.
    Stop(Result<(), Failure>),
    /// Let the tasks ready to run have their turn first: the outbox holds commands left for later.
    Yield,
    /// Wait for answers, the wake, the timer and, when `unsent`, for room to write.
    Select { unsent: bool },
}

/// Read the outbox before the reader's next wait: start watching a deadline that came, and tell
/// whether to stop, yield first, or wait.
fn next_round(
    shared: &Shared,
    reading: &VecDeque<Waiter>,
    timer: Pin<&mut Sleep>,
    watching: &mut bool,
    yielded: &mut bool,
) -> Round {
    let mut outbox = lock(&shared.outbox);
    if let Some(failure) = &outbox.failed {
        return Round::Stop(Err(failure.clone()));
    }
    if outbox.closed {
        // what was left for later still goes, though nobody hears its answer
        if outbox.deferred && !outbox.writing {
            writer::write_out(shared, outbox);
        }
        return Round::Stop(Ok(()));
    }
    if outbox.timed && !*watching {
        *watching = watch(&mut outbox, reading, timer);
    }
    let yield_first = outbox.deferred && !*yielded;
    *yielded = outbox.deferred;
    if yield_first {
        return Round::Yield;
    }
    // bytes the socket did not take, which no caller is writing
    Round::Select {
        unsent: !outbox.unsent.is_empty() && !outbox.writing,
    }
}

/// Set `timer` to the earliest deadline of the commands waiting; false, and no deadline to watch
/// any more, when none has one.
fn watch(outbox: &mut Outbox, reading: &VecDeque<Waiter>, timer: Pin<&mut Sleep>) -> bool {
    let Some(deadline) = earliest_deadline(reading, outbox) else {
        outbox.timed = false;
        return false;
    };
    timer.reset(deadline);
    true
}

/// The earliest deadline of a command still waiting for its answer.
fn earliest_deadline(reading: &VecDeque<Waiter>, outbox: &Outbox) -> Option<Instant> {
    let waiters = reading.iter().chain(&outbox.waiting);
    waiters.filter_map(|waiter| waiter.deadline).min()
}

/// Give the commands past their deadline a timeout (outside the outbox's lock: a settle may
/// send on this link); the reader watches the deadlines left.
fn expire_overdue(shared: &Shared, reading: &mut VecDeque<Waiter>) {
    let now = Instant::now();
    let overdue: Vec<Settle> = {
        let mut outbox = lock(&shared.outbox);
        let waiters = reading.iter_mut().chain(outbox.waiting.iter_mut());
        let overdue = waiters.filter_map(|waiter| waiter.expire(now)).collect();
        outbox.timed = earliest_deadline(reading, &outbox).is_some();
        overdue
    };
    for settle in overdue {
        settle(Err(too_late()));
    }
}

/// What a settled command past its deadline gets: a timeout, as a caller's timer would give.
fn too_late() -> RedisError {
    let why = "Redis did not answer within the command timeout";
    io::Error::new(io::ErrorKind::TimedOut, why).into()
}

/// Hand out every whole answer in `answers`, and keep the part of one that is still coming.
fn take_answers(
    shared: &Shared,
    answers: &mut Vec<u8>,
    reading: &mut VecDeque<Waiter>,
) -> Result<(), Failure> {
    let mut used = 0;
    loop {
        let next = resp::read_value(&answers[used..])
            .map_err(|garbled| Failure(io::ErrorKind::InvalidData, garbled.0))?;
        let Some((value, size)) = next else {
            break;
        };
        used += size;
        hand_out(shared, reading, value)?;
    }
    answers.drain(..used);
    Ok(())
}

/// Give `value` to the caller whose answer comes next.
fn hand_out(shared: &Shared, reading: &mut VecDeque<Waiter>, value: Value) -> Result<(), Failure> {
    if reading.is_empty() {
        // the outbox keeps the empty queue's room
        std::mem::swap(reading, &mut lock(&shared.outbox).waiting);
    }
    let next = match seeded(Defect::AnswerOutOfTurn) {
        true => reading.back_mut(),
        false => reading.front_mut(),
    };
    let Some(waiter) = next else {
        let why = "Redis answered a command that was not sent";
        return Err(Failure(io::ErrorKind::InvalidData, why.into()));
    };
    if waiter.take(value) {
        if let Some(answered) = reading.pop_front() {
            answered.answer();
            shared.unanswered.fetch_sub(1, Ordering::Relaxed);
        }
    }
    Ok(())
}
