//! The in-process backend: the same semantics as Redis (re-entry, leases, fencing, wake-ups) for one
//! process, demos and tests. Expired leases are found when a lock is next touched.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::{AcquireRequest, Attempt, HeldLock, Released};
use crate::waiters::{LockId, WaitRegistry};

#[derive(Debug)]
struct Held {
    owner: Arc<str>,
    count: u32,
    token: u64,
    expires: Instant,
}

#[derive(Debug, Default)]
struct Table {
    locks: HashMap<LockId, Held>,
    /// Sweep expired entries when the table grows past this size.
    sweep_at: usize,
}

/// Locks of one process, in memory.
#[derive(Debug)]
pub(crate) struct MemoryBackend {
    table: Mutex<Table>,
    /// One counter for every lock: tokens rise strictly per lock without remembering idle locks.
    last_token: AtomicU64,
    waiters: Arc<WaitRegistry>,
}

const MIN_SWEEP: usize = 1024;

impl MemoryBackend {
    pub(crate) fn new(waiters: Arc<WaitRegistry>) -> Self {
        MemoryBackend {
            table: Mutex::new(Table {
                locks: HashMap::new(),
                sweep_at: MIN_SWEEP,
            }),
            last_token: AtomicU64::new(0),
            waiters,
        }
    }

    fn table(&self) -> MutexGuard<'_, Table> {
        // Every operation below leaves the table consistent before it could panic.
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn try_acquire(&self, req: &AcquireRequest<'_>) -> Attempt {
        let now = Instant::now();
        let mut table = self.table();
        if let Some(held) = table.locks.get_mut(req.id) {
            if held.expires > now {
                if *held.owner == *req.owner {
                    held.count += 1;
                    held.expires = held.expires.max(now + req.lease);
                    return Attempt::Acquired { token: held.token };
                }
                return Attempt::Busy {
                    ttl: Some(held.expires - now),
                };
            }
        }
        let token = self.last_token.fetch_add(1, Ordering::Relaxed) + 1;
        table.locks.insert(
            req.id.clone(),
            Held {
                owner: Arc::from(req.owner),
                count: 1,
                token,
                expires: now + req.lease,
            },
        );
        if table.locks.len() >= table.sweep_at {
            table.locks.retain(|_, h| h.expires > now);
            table.sweep_at = (table.locks.len() * 2).max(MIN_SWEEP);
        }
        Attempt::Acquired { token }
    }

    pub(crate) fn release(&self, id: &LockId, owner: &str) -> Released {
        let now = Instant::now();
        let mut table = self.table();
        let Some(held) = table.locks.get_mut(id) else {
            return Released::NotHeld;
        };
        let mine = *held.owner == *owner && held.expires > now;
        if mine && held.count > 1 {
            held.count -= 1;
            return Released::StillHeld;
        }
        if !mine && held.expires > now {
            return Released::NotHeld;
        }
        table.locks.remove(id);
        drop(table);
        self.waiters.wake_one(id);
        if mine {
            Released::Freed
        } else {
            Released::NotHeld
        }
    }

    pub(crate) fn renew(&self, batch: &[HeldLock], lease: Duration) -> Vec<bool> {
        let now = Instant::now();
        let mut table = self.table();
        batch
            .iter()
            .map(|lock| match table.locks.get_mut(&lock.id) {
                Some(h) if h.owner == lock.owner && h.expires > now => {
                    h.expires = now + lease;
                    true
                }
                _ => false,
            })
            .collect()
    }
}
