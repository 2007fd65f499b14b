//! Writing what `tower-lock` prints: a closed pipe (`tower-lock list | head -1`) ends the output
//! quietly, never with a panic as `println!` would.

use std::io::{self, Write};

use crate::failure::Failure;

/// Write `lines` to standard output, one a line.
pub fn lines<I, S>(lines: I) -> Result<(), Failure>
where
    I: IntoIterator<Item = S>,
    S: AsRef<str>,
{
    let mut out = io::stdout().lock();
    let written = lines
        .into_iter()
        .try_for_each(|line| writeln!(out, "{}", line.as_ref()))
        .and_then(|()| out.flush());
    match written {
        Ok(()) => Ok(()),
        Err(err) if err.kind() == io::ErrorKind::BrokenPipe => Ok(()),
        Err(err) => Err(Failure::runtime(format!("cannot write the output: {err}"))),
    }
}

/// Write one line to standard error; a closed standard error is not worth failing over.
pub fn note(line: &str) {
    let _ = writeln!(io::stderr().lock(), "{line}");
}
