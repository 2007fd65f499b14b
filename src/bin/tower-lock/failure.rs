//! Why a command of `tower-lock` failed, and the exit code that says so.
//!
//! A script tells the cases apart by the code alone: 1 when the command could not be carried
//! out (Redis unreachable, a refusal), 2 when the command line was wrong, as clap does.

use std::fmt;

/// A command that could not be carried out, with its one-line message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// The exit code: [`Failure::RUNTIME`] or [`Failure::USAGE`].
    pub code: u8,
    /// What went wrong, on one line.
    pub message: String,
}

impl Failure {
    /// The exit code of a command that could not be carried out.
    pub const RUNTIME: u8 = 1;
    /// The exit code of a wrong command line (clap's too).
    pub const USAGE: u8 = 2;

    /// A failure of the command itself: the server, the network, a refusal.
    pub fn runtime(message: impl Into<String>) -> Failure {
        Failure {
            code: Failure::RUNTIME,
            message: message.into(),
        }
    }

    /// A command line that cannot be what its author meant.
    pub fn usage(message: impl Into<String>) -> Failure {
        Failure {
            code: Failure::USAGE,
            message: message.into(),
        }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}
