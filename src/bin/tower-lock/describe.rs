//! The words and figures `tower-lock` shows for a lock: durations, modes, families and who a
//! holder is, shared by the table, the details of one lock and the live screen.

use std::time::Duration;

use tower_lock::{HolderState, LockFamily, Mode, WaiterState};

/// What stands for a value nobody recorded.
pub const NONE: &str = "-";

/// How many characters of a manager id name it in a table (ids are 32 hex digits).
const SHORT_ID: usize = 12;

/// `d` for a person: `850ms`, `12.3s`, `4m05s`, `2h03m`, `3d04h`.
pub fn duration(d: Duration) -> String {
    let ms = d.as_millis();
    let s = d.as_secs();
    match s {
        _ if ms < 1_000 => format!("{ms}ms"),
        0..60 => format!("{}.{}s", s, d.subsec_millis() / 100),
        60..3_600 => format!("{}m{:02}s", s / 60, s % 60),
        3_600..86_400 => format!("{}h{:02}m", s / 3_600, s % 3_600 / 60),
        _ => format!("{}d{:02}h", s / 86_400, s % 86_400 / 3_600),
    }
}

/// An optional duration for a person, or [`NONE`].
pub fn maybe_duration(d: Option<Duration>) -> String {
    d.map_or_else(|| NONE.to_owned(), duration)
}

/// `d` in whole milliseconds, saturating.
pub fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// The name of a mode: `exclusive`, `fair`, `read`, `write`, `semaphore`.
pub fn mode(mode: Mode) -> &'static str {
    match mode {
        Mode::Exclusive => "exclusive",
        Mode::Fair => "fair",
        Mode::Read => "read",
        Mode::Write => "write",
        Mode::Semaphore(_) => "semaphore",
        _ => "other",
    }
}

/// The name of a family: `exclusive`, `fair`, `read_write`, `semaphore`.
pub fn family(family: LockFamily) -> &'static str {
    match family {
        LockFamily::Exclusive => "exclusive",
        LockFamily::Fair => "fair",
        LockFamily::ReadWrite => "read_write",
        LockFamily::Semaphore(_) => "semaphore",
        _ => "other",
    }
}

/// The permits of a semaphore family, `None` for every other family.
pub fn permits(family: Option<LockFamily>) -> Option<u32> {
    match family {
        Some(LockFamily::Semaphore(n)) => Some(n),
        _ => None,
    }
}

/// Who holds: the process label its manager gives, else the start of the manager id.
pub fn holder_name(holder: &HolderState) -> String {
    who(holder.label.as_deref(), &holder.manager)
}

/// Who waits: the process label its manager gives, else the start of the manager id.
pub fn waiter_name(waiter: &WaiterState) -> String {
    who(waiter.label.as_deref(), &waiter.manager)
}

fn who(label: Option<&str>, manager: &str) -> String {
    match label {
        Some(label) => label.to_owned(),
        None => manager.chars().take(SHORT_ID).collect(),
    }
}

/// `text`, or [`NONE`] when nothing was recorded.
pub fn or_none(text: Option<&str>) -> String {
    text.unwrap_or(NONE).to_owned()
}

/// `text` with control characters shown as `?`: a lock name is any text, and must not move the
/// cursor or ring the bell of the terminal that shows it.
pub fn printable(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_at_a_glance() {
        assert_eq!(duration(Duration::from_millis(850)), "850ms");
        assert_eq!(duration(Duration::from_millis(12_345)), "12.3s");
        assert_eq!(duration(Duration::from_secs(245)), "4m05s");
        assert_eq!(duration(Duration::from_secs(2 * 3600 + 180)), "2h03m");
        assert_eq!(
            duration(Duration::from_secs(3 * 86_400 + 4 * 3600)),
            "3d04h"
        );
        assert_eq!(
            duration(Duration::MAX),
            format!("{}d07h", u64::MAX / 86_400)
        );
        assert_eq!(maybe_duration(None), "-");
    }

    #[test]
    fn millis_saturate() {
        assert_eq!(millis(Duration::from_micros(1_999)), 1);
        assert_eq!(millis(Duration::MAX), u64::MAX);
    }

    #[test]
    fn control_characters_never_reach_the_terminal() {
        assert_eq!(printable("a\x1b[2Jb\n\u{7}"), "a?[2Jb??");
    }
}
