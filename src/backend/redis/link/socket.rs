//! The socket halves a link reads from and writes to: tokio's TCP halves, or, in the schedule
//! checks (`--cfg tower_lock_shuttle`), the halves of an in-memory pipe to a model server
//! (`schedules.rs`).

#[cfg(not(all(test, tower_lock_shuttle)))]
pub(super) use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};

#[cfg(all(test, tower_lock_shuttle))]
pub(super) use super::schedules::{split, OwnedReadHalf, OwnedWriteHalf};

/// The read and write halves of `stream`.
#[cfg(not(all(test, tower_lock_shuttle)))]
pub(super) fn split(stream: tokio::net::TcpStream) -> (OwnedReadHalf, OwnedWriteHalf) {
    stream.into_split()
}
