//! The acquire loop: one attempt, and if the lock is busy, sleep until a wake-up from the backend or
//! until the holder's lease would have run out (so a lost message cannot hang a waiter), then retry.
//! Cancellation-safe: an attempt in flight when the caller goes away is finished in the background
//! and undone if it took the lock; a waiter that leaves passes on any wake-up it did not use.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::guard::{LockGuard, LockInfo};
use super::ticket::WaitTicket;
use super::{Held, Shared};
use crate::backend::{AcquireRequest, Attempt};
use crate::background::{MustComplete, Undo, Work};
use crate::error::{BoxError, LockError};
use crate::key::LockKey;
use crate::lease::LostSignal;
use crate::options::{Lease, LockOptions, Mode};
use crate::waiters::LockId;

/// Retry after this long when the backend could not say how long the holder keeps the lock.
const UNKNOWN_TTL_RETRY: Duration = Duration::from_millis(50);

/// What a successful acquisition needs to build its guard.
struct Win<'a> {
    key: &'a str,
    id: LockId,
    owner: &'a Arc<str>,
    token: u64,
    lease: Duration,
    watched: bool,
    mode: Mode,
    /// The lease is known valid from here,
    since: Instant,
    /// for this long (the lease; a fair grant's claim lease until the watchdog extends it).
    valid_for: Duration,
}

impl Shared {
    /// Acquire `key` for `owner`; with `wait` false, one attempt only (`Ok(None)` when busy).
    pub(crate) async fn acquire(
        self: &Arc<Self>,
        key: &str,
        opts: &LockOptions,
        owner: &Arc<str>,
        wait: bool,
    ) -> Result<Option<LockGuard>, LockError> {
        let lock_key = LockKey::new(key)?;
        self.start();
        let mode = opts.mode_value();
        let started = Instant::now();
        let deadline = opts.wait_timeout_value().map(|t| started + t);
        let id = self.backend.lock_id(&lock_key);
        let (lease, watched) = match opts.lease_value() {
            Lease::Watchdog => (self.lease, true),
            Lease::Fixed(lease) => (lease, false),
        };
        let mut ticket = match wait {
            true => Some(
                WaitTicket::new(self, &id, owner, mode, deadline)
                    .await
                    .ok_or_else(|| timeout(key, started))?,
            ),
            false => None,
        };
        let mut win = Win {
            key,
            id: id.clone(),
            owner,
            token: 0,
            lease,
            watched,
            mode,
            since: started,
            valid_for: lease,
        };
        // the attempts that found the lock busy, and when the last one started
        let (mut busy_attempts, mut busy_since) = (0u32, None::<Instant>);
        loop {
            if let Some(ticket) = ticket.as_ref().filter(|_| busy_attempts > 1) {
                if ticket.waiter.grant().is_some() {
                    // This request tried again after it joined the queue (a heartbeat, a timer or
                    // a reconnection woke it), so its grant may be older than that attempt and
                    // reclaimed since (a frozen process's claim ran out, the lock went on). An
                    // attempt checks: it takes the grant if it is still ours.
                    ticket.waiter.forget_grant();
                    busy_attempts = 1;
                }
            }
            if let Some(token) = ticket.as_ref().and_then(|t| t.waiter.grant()) {
                // A fair grant: the lock is ours already, under a short claim lease.
                if let Some(ticket) = ticket.as_mut() {
                    ticket.acquired = true;
                }
                tracing::debug!(key, token, waited = ?started.elapsed(), "fair lock granted");
                win.token = token;
                // The claim lease began when Redis made the grant, which this process may learn of
                // late (it was frozen, say). The grant came after the one attempt that found the
                // lock busy (it joined the queue), and after the last heartbeat that found this
                // request still queued: the claim is counted from the later of the two.
                let queued = ticket.as_ref().map(WaitTicket::as_queued);
                let confirmed = queued.as_ref().and_then(|q| self.queued.confirmed(q));
                win.since = busy_since.max(confirmed).unwrap_or(started);
                win.valid_for = self.claim.min(win.lease);
                let lease = win.lease;
                let (guard, lost) = self.guard(win);
                // The watchdog's next heartbeat round (due well within the claim) extends the
                // claim to the request's lease, batched with the other grants, and moves the
                // guard's deadline with it.
                if let Some(held) = ticket.as_ref().map(WaitTicket::as_held) {
                    self.claims.add(held, lease, lost);
                }
                return Ok(Some(guard));
            }
            let attempt_started = Instant::now();
            let others_waiting = ticket.as_ref().is_some_and(WaitTicket::others_waiting);
            let queued = ticket.as_ref().is_some_and(|t| t.found_busy);
            let waiter = ticket.as_ref().map_or(owner, |t| t.waiter.name());
            let call = self.attempt(
                &id,
                owner,
                waiter,
                lease,
                wait,
                others_waiting,
                mode,
                queued,
            );
            let call = within(self.backend.attempt_timeout(), call);
            let attempt = match deadline {
                Some(deadline) => tokio::time::timeout_at(deadline.into(), call)
                    .await
                    .map_err(|_| timeout(key, started))?,
                None => call.await,
            };
            let attempt = match attempt {
                Ok(attempt) => attempt,
                Err(err) => {
                    let err = LockError::unavailable(key, err);
                    return Err(leaving(ticket.as_ref(), busy_attempts, err));
                }
            };
            match attempt {
                Attempt::Acquired { token } => {
                    if let Some(ticket) = ticket.as_mut() {
                        ticket.acquired = true;
                    }
                    tracing::debug!(key, token, waited = ?started.elapsed(), "lock acquired");
                    win.token = token;
                    win.since = attempt_started;
                    return Ok(Some(self.guard(win).0));
                }
                Attempt::OtherMode => {
                    let err = LockError::Unsupported {
                        key: key.to_owned(),
                        what: mixed_modes(mode),
                    };
                    return Err(leaving(ticket.as_ref(), busy_attempts, err));
                }
                Attempt::Busy { ttl } => {
                    let Some(ticket) = ticket.as_mut() else {
                        return Ok(None);
                    };
                    ticket.found_busy();
                    busy_attempts += 1;
                    busy_since = Some(attempt_started);
                    let ttl = ttl
                        .unwrap_or(UNKNOWN_TTL_RETRY)
                        .max(Duration::from_millis(1));
                    let mut until = Instant::now() + ttl;
                    if let Some(deadline) = deadline {
                        until = until.min(deadline);
                    }
                    tracing::trace!(key, ?ttl, "lock busy; waiting");
                    let woken = tokio::time::timeout_at(until.into(), ticket.waiter.woken()).await;
                    let expired = deadline.is_some_and(|d| Instant::now() >= d);
                    if woken.is_err() && expired && ticket.waiter.grant().is_none() {
                        return Err(timeout(key, started));
                    }
                }
            }
        }
    }

    /// Build the guard of a won lock, and its lost signal.
    fn guard(self: &Arc<Self>, win: Win<'_>) -> (LockGuard, Arc<LostSignal>) {
        let valid_until = win.since + win.valid_for;
        let lost = if win.watched {
            self.leases.hold(&win.id, win.owner, win.token, valid_until)
        } else {
            Arc::new(LostSignal::new(Some(valid_until)))
        };
        let info = LockInfo::new(Arc::from(win.key), win.token, lost.clone());
        let held = Held {
            shared: self.clone(),
            id: win.id,
            owner: win.owner.clone(),
            token: win.token,
            watched: win.watched,
            lost: lost.clone(),
            mode: win.mode,
        };
        (LockGuard::new(info, held), lost)
    }

    /// One attempt, finished in the background (and released if it won) should the caller go away.
    #[allow(clippy::too_many_arguments)]
    fn attempt(
        self: &Arc<Self>,
        id: &LockId,
        owner: &Arc<str>,
        waiter: &Arc<str>,
        lease: Duration,
        will_wait: bool,
        others_waiting: bool,
        mode: Mode,
        queued: bool,
    ) -> MustComplete<Result<Attempt, BoxError>> {
        let backend = self.backend.clone();
        let (id, owner, waiter) = (id.clone(), owner.clone(), waiter.clone());
        let (undo_backend, undo_id, undo_owner) = (backend.clone(), id.clone(), owner.clone());
        let call = Box::pin(async move {
            let req = AcquireRequest {
                id: &id,
                owner: &owner,
                waiter: &waiter,
                lease,
                will_wait,
                others_waiting,
                mode,
                queued,
            };
            backend.try_acquire(&req).await
        });
        let undo: Undo<_> = Box::new(move |out: Result<Attempt, BoxError>| -> Option<Work> {
            match out {
                Ok(Attempt::Acquired { token }) => Some(Box::pin(async move {
                    let _ = undo_backend
                        .release(&undo_id, &undo_owner, mode, token, true)
                        .await;
                })),
                _ => None,
            }
        });
        MustComplete::new(call, &self.background).with_undo(undo)
    }
}

/// The outcome of `call`, or an error once `limit` has passed. A call cut off that way finishes in
/// the background (see [`MustComplete`]) and is undone if it took the lock.
async fn within(
    limit: Option<Duration>,
    call: MustComplete<Result<Attempt, BoxError>>,
) -> Result<Attempt, BoxError> {
    let Some(limit) = limit else {
        return call.await;
    };
    tokio::time::timeout(limit, call)
        .await
        .unwrap_or_else(|_| Err(format!("Redis did not answer within {limit:?}").into()))
}

/// A request that had waited (`busy_attempts` found the lock busy) leaves with `err`: a wake-up
/// that led to its last attempt (or a timer did, which costs one more check) is passed on as it
/// leaves, else the next waiter sleeps on.
fn leaving(ticket: Option<&WaitTicket>, busy_attempts: u32, err: LockError) -> LockError {
    if let Some(ticket) = ticket.filter(|_| busy_attempts > 0) {
        ticket.waiter.keep_wake();
    }
    err
}

/// Why a request of `mode` was refused on a lock held or waited for in the other mode.
fn mixed_modes(mode: Mode) -> &'static str {
    match mode {
        Mode::Fair => {
            "a fair request on a lock held or waited for in exclusive mode: one lock takes one mode"
        }
        _ => "an exclusive request on a lock held or queued for in fair mode: one lock takes one mode",
    }
}

fn timeout(key: &str, started: Instant) -> LockError {
    LockError::Timeout {
        key: key.to_owned(),
        waited: started.elapsed(),
    }
}
