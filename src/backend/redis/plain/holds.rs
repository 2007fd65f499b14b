//! The plain holds of one backend: what releasing, renewing or re-entering each one needs.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::ids::{IdMap, OwnerId};
use crate::waiters::LockId;

/// The plain holds of one backend, by lock: one each, but for a moment two when a lost one is
/// released while its owner (or the next leader) takes the lock anew.
#[derive(Debug, Default)]
pub(crate) struct PlainHolds {
    table: Mutex<Table>,
    /// Numbers the holds' values, so that each value names one hold.
    next: AtomicU64,
    /// The server refused one of the plain path's commands (an ACL written for the scripts):
    /// every lock is taken by the script from then on.
    refused: AtomicBool,
    /// The server's clock less this process's wall clock, in µs, when the plain path last read
    /// it (0 before).
    server_offset: AtomicI64,
}

/// This process's wall clock, in µs since the Unix epoch.
fn wall_us() -> i64 {
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    since.map_or(0, |d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
}

/// The plain holds by lock, each with its owner, in the order they were taken.
type Table = IdMap<LockId, Vec<(Arc<str>, PlainHold)>>;

/// How much longer than the lead of a token over the server's clock a hold must have lasted, by
/// this process's clock, for the server's clock to have passed that token: the server's clock
/// reads whole microseconds, and two clocks' rates differ by far less than 1 %.
const CLOCK_MARGIN: Duration = Duration::from_micros(2);

/// One plain hold.
#[derive(Debug, Clone)]
pub(crate) struct PlainHold {
    pub(crate) token: u64,
    /// The server's clock, in microseconds, when the lock was taken,
    pub(crate) clock: u64,
    /// and this process's when the answer was read (later).
    pub(crate) taken: Instant,
    /// The lock's value: the owner id (after `!` in fair mode), `|` and the hold's number, then
    /// what `inspect` shows of the hold after tabs. It binds a release or a renewal to this
    /// hold, not to a later one of the same owner.
    pub(crate) value: Arc<str>,
}

impl PlainHold {
    /// Whether the server's clock may not have passed `token` yet. The server read `clock` before
    /// it answered, so it has run for at least as long as this process since, give or take
    /// [`CLOCK_MARGIN`] and 1 % (the server's clock must not step back: see `common.lua`).
    pub(crate) fn may_lead_clock(&self, token: u64) -> bool {
        let lead = token.saturating_sub(self.clock);
        let behind_after = Duration::from_micros(lead + lead / 100) + CLOCK_MARGIN;
        self.taken.elapsed() < behind_after
    }
}

impl PlainHolds {
    fn lock(&self) -> MutexGuard<'_, Table> {
        self.table
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Whether the plain path was refused by the server.
    pub(crate) fn refused(&self) -> bool {
        self.refused.load(Ordering::Relaxed)
    }

    /// The server refused the plain path's commands: locks are taken by script from now on.
    pub(crate) fn refuse(&self) {
        if !self.refused.swap(true, Ordering::Relaxed) {
            tracing::info!("Redis refused the plain path's commands: locks are taken by script");
        }
    }

    /// The value of a new plain hold of `owner` (`fair`: taken in fair mode), with `about`: what
    /// lock states show of it besides its start (see `meta_of` in `common.lua`).
    pub(crate) fn value(&self, owner: &OwnerId, fair: bool, about: &str) -> Arc<str> {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let mark = if fair { "!" } else { "" };
        let id = crate::ids::marked(mark, owner, '|', n);
        let began = self.server_now_us().to_string();
        let mut value = String::with_capacity(id.len() + 1 + began.len() + about.len());
        for part in [&*id, "\t", &began, about] {
            value.push_str(part);
        }
        Arc::from(value)
    }

    /// The server read its clock as `server_us` (µs) just now: this process's estimate of the
    /// server's clock follows it.
    pub(crate) fn saw_server_clock(&self, server_us: u64) {
        let offset = i64::try_from(server_us).unwrap_or(i64::MAX) - wall_us();
        self.server_offset.store(offset, Ordering::Relaxed);
    }

    /// The server's clock now, in µs, as this process tells it: its own wall clock, moved by
    /// what the server's answered last (a plain lock's start, shown by `LockManager::inspect`).
    fn server_now_us(&self) -> i64 {
        wall_us().saturating_add(self.server_offset.load(Ordering::Relaxed))
    }

    /// `owner`'s latest plain hold of `id`: the one its watchdog renews and a re-entry makes a
    /// hash (an earlier one was lost, and waits for its release).
    pub(crate) fn latest(&self, id: &LockId, owner: &str) -> Option<PlainHold> {
        let table = self.lock();
        let holds = table.get(id)?;
        let found = holds.iter().rev().find(|(o, _)| &**o == owner);
        found.map(|(_, hold)| hold.clone())
    }

    /// Take `owner`'s plain hold of `id` under `token` out of the table: its release is under
    /// way, and whatever Redis answers, nothing is left to renew or release (a failed release
    /// leaves the lease to run out, as a failed script call does).
    pub(crate) fn take(&self, id: &LockId, owner: &str, token: u64) -> Option<PlainHold> {
        let mut table = self.lock();
        let holds = table.get_mut(id)?;
        let at = (holds.iter()).position(|(o, hold)| &**o == owner && hold.token == token)?;
        let (_, hold) = holds.remove(at);
        if holds.is_empty() {
            table.remove(id);
        }
        Some(hold)
    }

    pub(crate) fn insert(&self, id: &LockId, owner: &OwnerId, hold: PlainHold) {
        let mut table = self.lock();
        let holds = table.entry(id.clone()).or_default();
        holds.push((owner.as_arc().clone(), hold));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plain_hold_is_taken_out_of_the_table_once_and_by_its_token() {
        let holds = PlainHolds::default();
        let id = LockId::new("{tower-lock:k}".to_owned());
        let owner = OwnerId::new("m:1");
        let hold = |token| PlainHold {
            token,
            clock: token,
            taken: Instant::now(),
            value: holds.value(&owner, true, "\thost:1\tGET /a"),
        };
        let (lost, taken_again) = (hold(10), hold(20));
        assert_ne!(lost.value, taken_again.value, "each value names one hold");
        assert!(lost.value.starts_with("!m:1|"));
        holds.insert(&id, &owner, lost);
        holds.insert(&id, &owner, taken_again);
        assert_eq!(holds.latest(&id, "m:1").map(|h| h.token), Some(20));
        assert_eq!(holds.take(&id, "m:1", 10).map(|h| h.token), Some(10));
        assert!(
            holds.take(&id, "m:1", 10).is_none(),
            "a release takes it once"
        );
        assert_eq!(holds.latest(&id, "m:1").map(|h| h.token), Some(20));
        assert_eq!(holds.take(&id, "m:1", 20).map(|h| h.token), Some(20));
        assert!(holds.lock().is_empty(), "nothing is left behind");
    }
}
