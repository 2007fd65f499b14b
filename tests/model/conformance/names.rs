//! The names both sides use: the lock's keys as the crate spells them (`names.rs` of the Redis
//! backend, on a standalone server), and a model client's manager, owner and waiter ids.

use crate::state::{Client, Waiter};

/// The lock hash (`{<namespace>:<name>}`).
pub const LOCK: &str = "{ns:lk}";

/// The inbox channel prefix: a manager's channel is this and its id.
pub const PREFIX: &str = "{ns}:inbox:";

/// Milliseconds per model tick. The scripts keep the waiting-managers record 10 000 ms past the
/// lock and the waiter's lease; the model keeps it one tick: a tick is 10 s.
pub const MS_PER_TICK: u64 = 10_000;

/// The manager id of client `c`.
pub fn manager(c: Client) -> String {
    format!("m{c}")
}

/// The owner id of client `c` (`<manager id>:<n>`; one owner per model process).
pub fn owner(c: Client) -> String {
    format!("m{c}:1")
}

/// The waiter id of one wait (`<owner id>|<n>`).
pub fn waiter(w: Waiter) -> String {
    format!("{}|{}", owner(w.0), w.1)
}

/// The value of plain hold `n` of client `c`: `!` first in fair mode, then what `inspect`
/// shows of the hold after a tab (when it began, in server µs: 0 here; no label, no request).
pub fn plain_value(c: Client, fair: bool, n: u8) -> String {
    let mark = if fair { "!" } else { "" };
    format!("{mark}{}|{n}\t0\t\t", owner(c))
}

/// A key of the lock: the lock's name and `suffix`.
pub fn key(suffix: &str) -> String {
    format!("{LOCK}{suffix}")
}

/// A wait's heartbeat key.
pub fn heartbeat(w: Waiter) -> String {
    key(&format!(":hb:{}", waiter(w)))
}

/// Milliseconds of `ticks`, as a script argument.
pub fn ms(ticks: u8) -> String {
    (u64::from(ticks) * MS_PER_TICK).to_string()
}
