//! The acquire loop: one attempt, and if the lock is busy, sleep until a wake-up from the backend or
//! until the holder's lease would have run out (so a lost message cannot hang a waiter), then retry.
//! Cancellation-safe: an attempt in flight when the caller goes away is finished in the background
//! and undone if it took the lock; a waiter that leaves passes on any wake-up it did not use.

use std::sync::Arc;
use std::time::{Duration, Instant};

mod attempt;

use super::entry::Request;
use super::guard::{LockGuard, LockInfo};
use super::live::{Hold, Through};
use super::refusal::{mixed_modes, NO_UPGRADE};
use super::ticket::WaitTicket;
use super::turns::Turn;
use super::{Releaser, Shared};
use crate::backend::Attempt;
use crate::error::LockError;
use crate::ids::OwnerId;
use crate::lease::LostSignal;
use crate::options::{Lease, Mode};
use crate::saturating::{deadline, later};
use crate::waiters::LockId;
use crate::watchdog::HoldStart;

/// Retry after this long when the backend could not say how long the holder keeps the lock.
const UNKNOWN_TTL_RETRY: Duration = Duration::from_millis(50);

/// An exclusive request that found the lock busy this many times, and was woken or timed out
/// each time, waits in fair order from then on (see [`Acquisition::lost_a_race`]).
const EXCLUSIVE_RACES: u32 = 1;

/// An attempt unanswered for this long means a slow or unreachable backend, not a busy lock: a
/// live Redis answers in a millisecond or so (this is also the quorum's default node timeout).
const SLOW_ANSWER: Duration = Duration::from_millis(250);

impl Shared {
    /// Acquire `key` for `owner` in the backend itself. A request that finds the lock held or
    /// queued for in the other family of excluding modes goes on in that family (see
    /// [`one_exclusion`]), from a fresh place among the waiters, within the same wait timeout.
    pub(super) async fn acquire_in_backend(
        self: &Arc<Self>,
        req: Request<'_>,
    ) -> Result<Option<LockGuard>, LockError> {
        let started = Instant::now();
        let mut mode = req.opts.mode_value();
        loop {
            match self.acquire_as(req, mode, started).await? {
                Tried::Done(guard) => return Ok(guard),
                Tried::AsOther(other) => mode = other,
            }
        }
    }

    /// [`acquire_in_backend`](Self::acquire_in_backend) in `mode`, for a request that started at
    /// `started`.
    async fn acquire_as(
        self: &Arc<Self>,
        req: Request<'_>,
        mode: Mode,
        started: Instant,
    ) -> Result<Tried, LockError> {
        let mut acquisition = Acquisition::new(self, req, mode, started);
        if req.wait {
            let stalls = self.waiters.stalls();
            acquisition.join_waiters(req.began).await?;
            // it waited for a request of the same owner, which the backend's stall ended
            acquisition.unless_stalled_since(stalls)?;
        }
        loop {
            if self.closing.is_closed() {
                return Err(acquisition.leaving(LockError::Closed));
            }
            acquisition.drop_stale_grant();
            if let Some(guard) = acquisition.take_grant() {
                return Ok(Tried::Done(Some(guard)));
            }
            let attempt_started = Instant::now();
            match acquisition.attempt().await? {
                Attempt::Acquired { token } => {
                    return Ok(Tried::Done(Some(acquisition.won(token, attempt_started))));
                }
                Attempt::OtherMode { held: Mode::Fair } if acquisition.mode == Mode::Exclusive => {
                    acquisition.go_fair();
                }
                Attempt::OtherMode { held } => match one_exclusion(acquisition.mode, held) {
                    Some(other) => return Ok(Tried::AsOther(other)),
                    None => return Err(acquisition.refused(mixed_modes(acquisition.mode, held))),
                },
                Attempt::NoUpgrade => return Err(acquisition.refused(NO_UPGRADE.to_owned())),
                Attempt::Busy { ttl } => {
                    if acquisition.ticket.is_none() {
                        return Ok(Tried::Done(None));
                    }
                    if acquisition.lost_a_race() {
                        acquisition.go_fair();
                        continue;
                    }
                    acquisition.wait_after_busy(ttl, attempt_started).await?;
                }
            }
        }
    }
}

/// How one try of [`Shared::acquire_as`] ended.
enum Tried {
    /// With the request's outcome: a guard, or `None` when busy and not waiting.
    Done(Option<LockGuard>),
    /// The lock is held or queued for in the other family of excluding modes: go on in this mode.
    AsOther(Mode),
}

/// The mode in which a request of `asked` goes on when the lock is held or queued for in `held`'s
/// family, if it has one. Exclusive and write holds are one exclusion for users: exclusive and
/// fair requests on a read/write lock act as writes (FIFO with its queue), and read and write
/// requests on an exclusive or fair lock wait as that mode (a read excluding more than it must,
/// until the lock is free of that family). Semaphores mix with nothing else: a count of permits
/// has no meaning for the other families.
fn one_exclusion(asked: Mode, held: Mode) -> Option<Mode> {
    match (asked, held) {
        (Mode::Exclusive | Mode::Fair, Mode::Read | Mode::Write) => Some(Mode::Write),
        (Mode::Read | Mode::Write, Mode::Exclusive | Mode::Fair) => Some(held),
        _ => None,
    }
}

/// One call of [`Shared::acquire`]: what it asks for, and how far it has come.
struct Acquisition<'a> {
    shared: &'a Arc<Shared>,
    key: &'a str,
    id: LockId,
    owner: &'a OwnerId,
    mode: Mode,
    lease: Duration,
    /// Kept by the watchdog (else a fixed lease).
    watched: bool,
    /// The hold's ceiling (a fixed lease is cut to it already).
    max_hold: Option<Duration>,
    started: Instant,
    deadline: Option<Instant>,
    /// The request's place among the local waiters, when it may wait.
    ticket: Option<WaitTicket>,
    /// The attempts that found the lock busy,
    busy_attempts: u32,
    /// and when the last one started.
    busy_since: Option<Instant>,
    /// The owner is a leader's id, made for this hold (see `AcquireRequest`).
    leader: bool,
    /// The work the hold serves (`LockOptions::request`).
    request: Option<Arc<str>>,
    /// The turn of the attempt out, or of the one that took the lock until its hold is among the
    /// live guards (see `turns.rs`).
    turn: Option<Arc<Turn>>,
}

impl<'a> Acquisition<'a> {
    fn new(shared: &'a Arc<Shared>, req: Request<'a>, mode: Mode, started: Instant) -> Self {
        let (key, owner, opts) = (req.key, req.owner, req.opts);
        let watched = opts.lease_value() == Lease::Watchdog;
        Acquisition {
            shared,
            key,
            id: req.id.clone(),
            owner,
            mode,
            lease: opts.held_lease(shared.lease),
            watched,
            max_hold: opts.max_hold_value(),
            started,
            deadline: (opts.wait_timeout_value()).and_then(|t| deadline(started, t)),
            ticket: None,
            busy_attempts: 0,
            busy_since: None,
            leader: req.leader,
            request: req.request.cloned(),
            turn: None,
        }
    }

    /// Take a place among the local waiters of the lock (after any request of the same owner),
    /// as a request that `began` then (the oldest-wait gauge counts from there).
    async fn join_waiters(&mut self, began: Instant) -> Result<(), LockError> {
        let (shared, id, owner) = (self.shared, &self.id, self.owner);
        let ticket = WaitTicket::new(shared, id, owner, (self.mode, began), self.deadline).await;
        self.ticket = Some(ticket.ok_or_else(|| self.timeout())?);
        Ok(())
    }

    /// A request that tried again after it joined the queue (a heartbeat, a timer or a
    /// reconnection woke it) may hold a grant older than that attempt and reclaimed since (a frozen
    /// process's claim ran out, the lock went on): forget it, and let an attempt check whether the
    /// grant is still ours (it takes it if so).
    fn drop_stale_grant(&mut self) {
        let Some(ticket) = self.ticket.as_ref().filter(|_| self.busy_attempts > 1) else {
            return;
        };
        if ticket.grant().is_some() {
            ticket.forget_grant();
            self.busy_attempts = 1;
        }
    }

    /// An exclusive request found the lock busy again after a wake-up or its timer: others took
    /// it first, and may go on doing so. Exclusive mode promises no order, but bounds the wait:
    /// such a request queues in fair order from its next attempt.
    /// (A quorum has no fair queue: its exclusive requests stay unordered.)
    fn lost_a_race(&self) -> bool {
        self.mode == Mode::Exclusive
            && self.busy_attempts >= EXCLUSIVE_RACES
            && self.shared.backend.unsupported(Mode::Fair).is_none()
    }

    /// Go on as a fair request: the lock is held or queued for in fair mode (a fair lock is one
    /// with exclusive locks; requests of both wait in its queue), or this exclusive request lost
    /// a race for it. The other exclusive requests of this process waiting for it are woken, to
    /// find the fair state and queue too: a fair lock's hand-offs are grants to its queue, and
    /// they would sleep through them.
    fn go_fair(&mut self) {
        tracing::trace!(key = self.key, "exclusive request waits in the fair queue");
        self.mode = Mode::Fair;
        self.busy_attempts = 0;
        self.busy_since = None;
        if let Some(ticket) = self.ticket.as_mut() {
            ticket.wait_in_fair_queue();
            self.shared.waiters.wake_unqueued(&self.id);
        }
    }

    /// A fair grant received: the lock is ours already, under a short claim lease (see the
    /// implementation notes in `watchdog/claims.rs`). A grant whose claim may have run out
    /// before it arrived (this process was frozen or cut off), or that may have been taken over
    /// as a dead holder's, is forgotten: the next attempt asks Redis, which knows whether it
    /// still stands.
    fn take_grant(&mut self) -> Option<LockGuard> {
        let ticket = self.ticket.as_mut()?;
        let token = ticket.grant()?;
        // The claim lease began when Redis made the grant, which this process may learn of late
        // (it was frozen, say). The grant came after the one attempt that found the lock busy (it
        // joined the queue), and after the last heartbeat that found this request still queued:
        // the claim is counted from the later of the two.
        let confirmed = self.shared.queued.confirmed(&ticket.as_queued());
        let since = self.busy_since.max(confirmed).unwrap_or(self.started);
        let claim = self.shared.claim.min(self.lease);
        let now = Instant::now();
        // under takeover, the hold may also have been taken over once its inbox went unproven
        // for a grace, or be lost before the inbox proves itself again
        let taken_over = self.shared.inbox_proof_of(&self.id).too_late(since, now);
        if later(since, claim) <= now || taken_over {
            tracing::debug!(
                key = self.key,
                token,
                "a fair grant arrived after its claim could have run out"
            );
            ticket.forget_grant();
            self.busy_attempts = 1;
            return None;
        }
        ticket.acquired();
        let held = ticket.as_held();
        tracing::debug!(key = self.key, token, waited = ?self.started.elapsed(), "fair lock granted");
        let (guard, lost) = self.guard(token, since, claim);
        // The watchdog's next heartbeat round (due well within the claim) extends the claim to
        // the request's lease, batched with the other grants, and moves the guard's deadline.
        self.shared.claims.add(held, self.lease, lost);
        Some(guard)
    }

    /// The lock was taken by the attempt that started at `attempt_started`.
    fn won(mut self, token: u64, attempt_started: Instant) -> LockGuard {
        if let Some(ticket) = self.ticket.as_mut() {
            ticket.acquired();
        }
        tracing::debug!(key = self.key, token, waited = ?self.started.elapsed(), "lock acquired");
        self.guard(token, attempt_started, self.lease).0
    }

    /// The lock cannot be had with these options, for the reason `what`.
    fn refused(&self, what: String) -> LockError {
        self.leaving(LockError::Unsupported {
            key: self.key.to_owned(),
            what,
        })
    }

    /// The attempt that started at `attempt_started` found the lock busy: sleep until a wake-up,
    /// the holder's lease would have run out (`ttl`), or the deadline. A backend that stops
    /// answering meanwhile ends the wait as unavailable: the wake-up would not come, and another
    /// attempt would wait out the command timeout once more.
    async fn wait_after_busy(
        &mut self,
        ttl: Option<Duration>,
        attempt_started: Instant,
    ) -> Result<(), LockError> {
        let Some(ticket) = self.ticket.as_mut() else {
            return Ok(());
        };
        ticket.found_busy();
        self.busy_attempts += 1;
        self.busy_since = Some(attempt_started);
        let ttl = ttl
            .unwrap_or(UNKNOWN_TTL_RETRY)
            .max(Duration::from_millis(1));
        let mut until = later(Instant::now(), ttl);
        if let Some(deadline) = self.deadline {
            until = until.min(deadline);
        }
        tracing::trace!(key = self.key, ?ttl, "lock busy; waiting");
        let stalls = self.shared.waiters.stalls();
        let woken = tokio::time::timeout_at(until.into(), ticket.woken()).await;
        if ticket.grant().is_some() {
            return Ok(());
        }
        self.unless_stalled_since(stalls)?;
        let expired = self.deadline.is_some_and(|d| Instant::now() >= d);
        if woken.is_err() && expired {
            return Err(self.timeout());
        }
        Ok(())
    }

    /// Unavailable when the backend stalled (left a command unanswered for the command timeout)
    /// since it had stalled `stalls` times: a request that was waiting then ends.
    fn unless_stalled_since(&self, stalls: u64) -> Result<(), LockError> {
        if self.shared.waiters.stalls() == stalls {
            return Ok(());
        }
        let cause = "Redis stopped answering while the request waited: a command of this \
            manager went unanswered for the command timeout";
        let err = LockError::unavailable(self.key, cause);
        self.shared.outage.failed(&err);
        Err(self.leaving(err))
    }

    /// Build the guard of a won lock, valid from `since` for `valid_for`, and its lost signal.
    fn guard(
        &self,
        token: u64,
        since: Instant,
        valid_for: Duration,
    ) -> (LockGuard, Arc<LostSignal>) {
        let valid_until = later(since, valid_for);
        let key: Arc<str> = Arc::from(self.key);
        let lost = if self.watched {
            let start = HoldStart {
                token,
                since,
                valid_until,
                max_hold: self.max_hold,
            };
            (self.shared.leases).hold(&key, &self.id, self.owner, start)
        } else {
            Arc::new(LostSignal::new(key.clone(), Some(valid_until)))
        };
        // the server answered the call that made this hold: it held it after `since`
        lost.prove(since);
        // the hold may be taken over once its holder is seen dead (on a quorum, by a majority)
        match (self.shared.backend).quorum_watch(&self.id, self.owner, token) {
            Some(watch) => lost.watch_quorum(watch),
            None => lost.watch_takeover(&self.shared.inbox_proof_of(&self.id), since),
        }
        let info = LockInfo::new(key.clone(), token, lost.clone());
        let number = self.shared.live.insert(Hold {
            key,
            id: self.id.clone(),
            owner: self.owner.clone(),
            token,
            watched: self.watched,
            lost: lost.clone(),
            mode: self.mode,
            through: Through::Backend,
        });
        let held = Releaser {
            shared: self.shared.clone(),
            number,
        };
        (LockGuard::new(info, held), lost)
    }

    /// A request that had waited leaves with `err`: a wake-up that led to its last attempt (or a
    /// timer did, which costs one more check) is passed on as it leaves, else the next waiter
    /// sleeps on.
    fn leaving(&self, err: LockError) -> LockError {
        if let Some(ticket) = self.ticket.as_ref().filter(|_| self.busy_attempts > 0) {
            ticket.keep_wake();
        }
        err
    }

    fn timeout(&self) -> LockError {
        LockError::Timeout {
            key: self.key.to_owned(),
            waited: self.started.elapsed(),
        }
    }
}
