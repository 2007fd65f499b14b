//! What [`LockManager::inspect`](crate::LockManager::inspect) and
//! [`LockManager::list`](crate::LockManager::list) report: one lock's holders and waiters, read
//! at one instant.

use std::time::Duration;

use crate::options::Mode;

/// The state of one lock at one instant, read by its backend in one atomic step.
///
/// An operator asks "who holds this lock and who waits behind it": the answer comes from one
/// script call on Redis, so the holders and the queue it shows existed together. A free lock is a
/// state too (no holders, no waiters), not an error.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct LockState {
    /// The lock name, as given to `inspect` (for `list`, as recovered from Redis; a name too long
    /// to be stored as itself shows as `#` and its SHA-256).
    pub key: String,
    /// The family of modes the lock is held or queued in; `None` when nothing says (a free lock
    /// with nobody queued, or only managers waiting in exclusive mode).
    pub family: Option<LockFamily>,
    /// Every hold, each with its owner and lease.
    pub holders: Vec<HolderState>,
    /// Every waiter the backend records, in queue order: fair and shared queues first, then the
    /// managers waiting in exclusive mode, longest waiting first.
    pub waiters: Vec<WaiterState>,
    /// The highest fencing token the lock's counter has issued or reserved, as the server knows
    /// it. Tokens a holder's process hands out from its reserved block are not seen here.
    pub last_token: Option<u64>,
}

impl LockState {
    /// Whether nobody holds the lock.
    ///
    /// A free lock may still have waiters for a moment: a grant is on its way to them.
    pub fn is_free(&self) -> bool {
        self.holders.is_empty()
    }

    /// Whether nobody holds the lock and nobody waits for it.
    ///
    /// `list` leaves such locks out: their keys are leftovers about to expire.
    pub fn is_idle(&self) -> bool {
        self.holders.is_empty() && self.waiters.is_empty()
    }
}

/// The family of modes a lock is used in.
///
/// One lock takes one family at a time, so an operator reading a state needs to know which rules
/// its holders follow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum LockFamily {
    /// Exclusive, not ordered: waiting managers are told when it frees.
    Exclusive,
    /// Exclusive, granted to its queue in order of arrival.
    Fair,
    /// Any number of read holds, or one write hold, granted in order.
    ReadWrite,
    /// At most this many holds at once, granted in order.
    Semaphore(u32),
}

/// One hold of a lock.
///
/// It says who to ask (the manager and owner ids) and how soon the hold ends by itself.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct HolderState {
    /// The owner id (`<manager id>:<n>`): one request, or one `LockOwner`.
    pub owner: String,
    /// The id of the manager (one per process) whose request holds it.
    pub manager: String,
    /// The mode of the hold: exclusive, fair, read, write, or a permit.
    pub mode: Mode,
    /// The hold's fencing token; `None` for a hold taken on the fast path, whose token only its
    /// holder knows.
    pub token: Option<u64>,
    /// How many holds of the owner the backend records. Re-entries made in the holder's
    /// process are counted there, so on Redis this is usually 1 however often it re-entered.
    pub count: u32,
    /// How long until the lease runs out unless renewed, by the server's clock; `None` when the
    /// backend keeps no expiry for it.
    pub lease_left: Option<Duration>,
    /// How long the hold has existed, by the server's clock; `None` when the backend did not
    /// record when it began.
    pub held_for: Option<Duration>,
    /// The holder's process, as its manager names itself
    /// ([`LockManagerBuilder::label`](crate::LockManagerBuilder::label); the host name and
    /// process id by default). It travels with the acquisition, so it outlives its manager.
    pub label: Option<String>,
    /// The request the hold serves: through the layer, its method and matched route, as
    /// `GET /accounts/{id}` (never its query string or headers); else what its owner was named
    /// ([`LockOwner::request`](crate::LockOwner::request)). `None` when nothing named it. After a
    /// hand-off within a process (cohorts, read groups), the request that took it from the
    /// server.
    pub request: Option<String>,
}

/// One waiter of a lock.
///
/// The queue order is the order of grants: the first waiter listed is served first.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct WaiterState {
    /// The wait's id: `<owner id>|<n>` (with `|<kind>` for a shared lock) for a queued request,
    /// or the manager id for a manager waiting in exclusive mode.
    pub waiter: String,
    /// The id of the manager whose request waits.
    pub manager: String,
    /// What it waits for: fair, read, write, a permit, or exclusive (a waiting manager).
    pub mode: Mode,
    /// How long it has waited, by the server's clock, when the backend records it (memory
    /// records nothing of a wait: neither its start nor its request).
    pub waited: Option<Duration>,
    /// The waiter's process, as its manager names itself; `None` for a manager waiting in
    /// exclusive mode, which records only its id.
    pub label: Option<String>,
}

/// `text` fit to travel in a lock's state: tabs, line breaks and `|` (the separators of the
/// stored form) as spaces, at most [`MAX_LABEL`] bytes.
pub(crate) fn clean_label(text: &str) -> std::sync::Arc<str> {
    let mut end = text.len().min(MAX_LABEL);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let separators = ['\t', '\n', '\r', '|'];
    if text[..end].contains(separators) {
        return text[..end].replace(separators, " ").into();
    }
    text[..end].into()
}

/// The longest process label or request name kept, in bytes.
pub(crate) const MAX_LABEL: usize = 200;

/// The manager id of an owner id (`<manager id>:<n>`) or a waiter (`<owner id>|...`).
pub(crate) fn manager_of(owner: &str) -> &str {
    owner.split([':', '|']).next().unwrap_or(owner)
}

/// The mode a shared waiter's kind letter (`r`, `w`, `n`) names on a lock of `family`.
pub(crate) fn shared_mode(kind: char, family: Option<LockFamily>) -> Mode {
    match (kind, family) {
        ('r', _) => Mode::Read,
        ('w', _) => Mode::Write,
        (_, Some(LockFamily::Semaphore(n))) => Mode::Semaphore(n),
        _ => Mode::Semaphore(0),
    }
}
