//! Why a lock cannot be had with the options asked for: a lock takes one family of modes at a
//! time, and a read hold never becomes a write hold.

use crate::options::Mode;

/// Why a request that holds a read asking to write is refused.
pub(super) const NO_UPGRADE: &str =
    "a write request of an owner that holds a read: a read hold does not \
     become a write hold (two readers doing so would wait for each other for ever)";

/// Why a request of `mode` was refused on a lock held or waited for in the mode `held`.
pub(super) fn mixed_modes(mode: Mode, held: Mode) -> String {
    if let (Mode::Semaphore(n), Mode::Semaphore(_)) = (mode, held) {
        return format!(
            "a semaphore({n}) request on a semaphore of another size: every request of one lock \
             names the same number of permits"
        );
    }
    format!(
        "a {} request on a lock held or waited for in {} mode: one lock takes one family of \
         modes (exclusive and fair, read/write, semaphore)",
        mode.name(),
        family_name(held)
    )
}

/// The name of the family of `mode`, as errors give it.
fn family_name(mode: Mode) -> &'static str {
    match mode {
        Mode::Exclusive | Mode::Fair => "exclusive and fair",
        Mode::Read | Mode::Write => "read/write",
        other => other.name(),
    }
}
