//! Writing a link's commands: one writer at a time, outside the outbox's lock. A caller that finds
//! no writer becomes it and writes; callers that come while it writes only append their bytes,
//! which it writes in its next round, several commands in one system call. Nobody waits for the
//! lock through a system call, and a busy connection writes in batches.

use std::io;

use super::socket::OwnedWriteHalf;
use super::{lock, Outbox, Shared};
use crate::sync::MutexGuard;

/// The most writes one writer makes before it leaves the rest to the reader task: a caller writes
/// the commands that came while it wrote, but does not keep writing for everyone else.
const ROUNDS: usize = 4;

/// The most room the outbox keeps once it is written out: commands that piled up behind a frozen
/// server (megabytes) do not stay allocated for the life of the connection.
const KEPT_ROOM: usize = 64 * 1024;

/// Write what waits in `outbox`, as its one writer. True when all of it went; false when the
/// socket was full (the rest waits in the outbox, ahead of what came meanwhile), the link failed
/// (its failure is set), or `ROUNDS` writes were made: then the reader task must go on.
pub(super) fn write_out<'a>(shared: &'a Shared, mut outbox: MutexGuard<'a, Outbox>) -> bool {
    outbox.writing = true;
    // whatever was left for later goes now
    outbox.deferred = false;
    for _ in 0..ROUNDS {
        let mut bytes = std::mem::take(&mut outbox.unsent);
        drop(outbox);
        let written = write_some(&shared.writer, &bytes);
        outbox = lock(&shared.outbox);
        let written = match written {
            Ok(written) => written,
            Err(err) => {
                // the reader fails every waiter
                outbox.failed.get_or_insert(err.into());
                outbox.writing = false;
                return false;
            }
        };
        if written < bytes.len() {
            bytes.drain(..written);
            bytes.extend_from_slice(&outbox.unsent);
            outbox.unsent = bytes;
            outbox.writing = false;
            return false;
        }
        if outbox.unsent.is_empty() {
            // its room serves the next commands
            bytes.clear();
            if bytes.capacity() <= KEPT_ROOM {
                outbox.unsent = bytes;
            }
            outbox.writing = false;
            return true;
        }
    }
    outbox.writing = false;
    false
}

/// Write as much of `bytes` as the socket takes now: how many it took.
fn write_some(writer: &OwnedWriteHalf, bytes: &[u8]) -> io::Result<usize> {
    let mut written = 0;
    while written < bytes.len() {
        match writer.try_write(&bytes[written..]) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(more) => written += more,
            Err(err) if err.kind() == io::ErrorKind::WouldBlock => break,
            Err(err) => return Err(err),
        }
    }
    Ok(written)
}
