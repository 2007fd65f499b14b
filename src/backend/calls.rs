//! What the manager and a backend exchange: an attempt's request and its outcome, a hold to
//! release and how the release ended, a party to a lock, and the names and margins every backend
//! reads the same way (waiters' names, token blocks, the drift allowance).

use std::sync::Arc;
use std::time::Duration;

use crate::ids::OwnerId;
use crate::options::Mode;
use crate::waiters::LockId;

/// One attempt to take a lock.
#[derive(Debug)]
pub(crate) struct AcquireRequest<'a> {
    pub(crate) id: &'a LockId,
    pub(crate) owner: &'a OwnerId,
    /// This request's name in a fair lock's queue, `<owner>|<n>`: one per wait, so that nothing
    /// meant for an earlier wait of the same owner reaches this one (the owner, when the request
    /// does not wait).
    pub(crate) waiter: &'a str,
    pub(crate) lease: Duration,
    /// The caller will wait if the lock is busy: the backend records that this process waits.
    pub(crate) will_wait: bool,
    /// Other requests of this process still wait for the same lock after this one.
    pub(crate) others_waiting: bool,
    pub(crate) mode: Mode,
    /// An earlier attempt of this request found the lock busy and recorded it as waiting. Fair
    /// mode: the owner joined the lock's queue (a lock found held by it is its grant, not a
    /// re-entry). Exclusive mode: the backend may list this process among the waiting ones.
    pub(crate) queued: bool,
    /// The owner id is a cohort's (or a read group's) leader's, made for this one hold: it holds
    /// nothing of the lock and never re-enters it, so that a backend may take the lock in a way
    /// no re-entry could find (Redis's plain path).
    pub(crate) leader: bool,
    /// The token of the hold the owner has of the lock in this manager (its live guards), or
    /// `None` when it holds nothing there. Only that hold is re-entered: a hold of the owner that
    /// the backend has under another token (a restart from a snapshot brought an old one back)
    /// is not the owner's any more, and the attempt replaces it with a fresh one under a new
    /// token. With `None`, a fair lock may also be taken on Redis's plain path.
    pub(crate) held: Option<u64>,
    /// The label of this process, for lock states (`LockManagerBuilder::label`).
    pub(crate) label: &'a str,
    /// The work the hold serves (`LockOwner::request`), for lock states.
    pub(crate) request: Option<&'a str>,
}

impl AcquireRequest<'_> {
    /// What lock states show of the hold besides its start, as the scripts store it after the
    /// start (`meta_of` in `common.lua`): a tab, the label, a tab, the request.
    pub(crate) fn about(&self) -> String {
        let request = self.request.unwrap_or("");
        let mut about = String::with_capacity(2 + self.label.len() + request.len());
        for part in ["\t", self.label, "\t", request] {
            about.push_str(part);
        }
        about
    }
}

/// Tokens the backend reserves with every acquisition: its own and the ones after it, for local
/// hand-offs (`TOKEN_BLOCK` in `common.lua`).
pub(crate) const TOKEN_BLOCK: u32 = 64;

/// The clock-drift allowance of a lease: a server's clock may run up to 1% faster than the
/// client's, plus 2 ms for the granularity of its expiry (RedLock's rule). Each Redis server is
/// asked to keep a lease for `lease + drift`, while the client counts `lease`: the lost signal
/// then fires before any server may free the lock, even with its clock that far ahead.
pub(crate) fn drift(lease: Duration) -> Duration {
    lease / 100 + Duration::from_millis(2)
}

/// A random duration in `[0, max]`, so that processes that would act at once (retry a split lock,
/// reconnect) do not act in lockstep.
pub(crate) fn jitter(max: Duration) -> Duration {
    let nanos = u64::try_from(max.as_nanos()).unwrap_or(u64::MAX);
    if nanos == 0 {
        return Duration::ZERO;
    }
    // A v4 UUID is 122 random bits from the OS: plenty, and no extra dependency.
    let random = uuid::Uuid::new_v4().as_u128() as u64;
    Duration::from_nanos(random % nanos.saturating_add(1))
}

/// The kind of a shared lock's waiter, `<owner>|<n>|<kind>`: `r`, `w` or `n`; `None` for any
/// other waiter (`<owner>|<n>`).
pub(crate) fn shared_kind(waiter: &str) -> Option<char> {
    let mut parts = waiter.rsplitn(3, '|');
    let (last, _) = (parts.next()?, parts.next()?);
    parts.next()?;
    let mut chars = last.chars();
    let kind = chars.next()?;
    chars.next().is_none().then_some(kind)
}

/// The kind a wait for a lock of `mode` names itself by (see [`shared_kind`]).
pub(crate) fn shared_kind_of(mode: Mode) -> Option<char> {
    match mode {
        Mode::Read => Some('r'),
        Mode::Write => Some('w'),
        Mode::Semaphore(_) => Some('n'),
        _ => None,
    }
}

/// The family a shared lock of `mode` records itself as: `rw`, or `s` and the number of permits.
pub(crate) fn shared_family(mode: Mode) -> Option<String> {
    match mode {
        Mode::Read | Mode::Write => Some("rw".to_owned()),
        Mode::Semaphore(n) => Some(format!("s{n}")),
        _ => None,
    }
}

/// The owner id of a fair waiter, `<owner>|<n>` (owner ids have no `|`).
pub(crate) fn owner_of(waiter: &str) -> &str {
    waiter.split('|').next().unwrap_or(waiter)
}

/// The outcome of one attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Attempt {
    /// The caller owns the lock (again, if it already did) under this fencing token.
    Acquired { token: u64 },
    /// Someone else holds it for at most `ttl` more (`None`: unknown, retry soon).
    Busy { ttl: Option<Duration> },
    /// The lock is held or waited for in another family of modes, `held` (exclusive, fair,
    /// read/write, semaphore; or a semaphore of another size): families are not mixed on one
    /// lock, since neither would see the other's holders and waiters.
    OtherMode { held: Mode },
    /// The owner holds a read of the lock and asked to write: a read hold does not become a
    /// write hold (two readers doing so would wait for each other for ever).
    NoUpgrade,
}

/// One hold to release: see [`Backend::release`] for what each part means.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ToRelease<'a> {
    pub(crate) id: &'a LockId,
    pub(crate) owner: &'a OwnerId,
    pub(crate) mode: Mode,
    pub(crate) token: u64,
    pub(crate) last_used: Option<u64>,
}

/// The outcome of a release.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Released {
    /// The lock is free now (one waiter was told).
    Freed,
    /// The owner still holds it (re-entry count above zero).
    StillHeld,
    /// The owner did not hold it any more: the lease had been lost.
    NotHeld,
}

/// A lock and one party to it: the owner that holds it (as the watchdog renews it), or the wait
/// queued for it (as the watchdog heartbeats it: `owner` is then the wait's name, `<owner>|<n>`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct LockParty {
    pub(crate) id: LockId,
    pub(crate) owner: Arc<str>,
}
