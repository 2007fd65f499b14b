//! How a request takes and gives back a lock through its cohort (see `cohort.rs`): it enters, then
//! leads (takes the lock in the backend) or waits for its turn; releasing, it hands the lock to
//! the next request of this process, or gives it back to the backend.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

use super::cohort::{self, Enter, Seat, Turn};
use super::entry::Request;
use super::guard::{LockGuard, LockInfo, Releaser};
use super::live::{Hold, Through};
use super::Shared;
use crate::backend::{Backend, Released};
use crate::error::{BoxError, LockError};
use crate::ids::OwnerId;
use crate::lease::LostSignal;
use crate::options::{Lease, LockOptions, Mode};
use crate::saturating;
use crate::waiters::{LockId, WaitStart};

impl Shared {
    /// Whether a request with `opts` goes through a cohort: an exclusive or fair one (fair ones
    /// keep FIFO order unless they opted in to cohort order), kept by the watchdog with no
    /// ceiling (a fixed lease or a ceiling counts from the request's own hold, and a cohort's
    /// hold is shared by requests in turn), on a single Redis server or cluster (in
    /// memory a hand-off costs no round trip anyway; a quorum's holds are per master), with
    /// cohorting on (a bound above zero).
    pub(super) fn cohorted(&self, opts: &LockOptions) -> bool {
        self.cohorts.bound > 0
            && matches!(opts.mode_value(), Mode::Exclusive | Mode::Fair)
            && opts.lease_value() == Lease::Watchdog
            && opts.max_hold_value().is_none()
            && self.backend_has_cohorts()
    }

    #[cfg(feature = "redis")]
    pub(super) fn backend_has_cohorts(&self) -> bool {
        matches!(*self.backend, Backend::Redis(_))
    }

    #[cfg(not(feature = "redis"))]
    pub(super) fn backend_has_cohorts(&self) -> bool {
        let _ = &self.backend;
        false
    }

    /// A re-entry of `owner` into `id`, when it holds the lock through its cohort (in either
    /// mode: a fair request of the holder re-enters too). A re-entry with a fixed lease reports
    /// itself lost at the end of that lease, or when the cohort's lease is lost if that comes
    /// first.
    pub(super) fn reenter_cohort(
        self: &Arc<Self>,
        id: &LockId,
        owner: &OwnerId,
        opts: &LockOptions,
    ) -> Option<LockGuard> {
        let (hold, token) = self.cohorts.reenter(id, owner)?;
        Some(self.reentered_guard(hold, token, opts))
    }

    /// The guard of a re-entry into `hold` (a cohort's or a read group's) under `token`. With a
    /// fixed lease or a ceiling it reports itself lost at the end of that lease or ceiling,
    /// counted from the re-entry, or when the shared hold's lease is lost if that comes first.
    pub(super) fn reentered_guard(
        self: &Arc<Self>,
        hold: Hold,
        token: u64,
        opts: &LockOptions,
    ) -> LockGuard {
        let lost = match (opts.lease_value(), opts.max_hold_value()) {
            (Lease::Watchdog, None) => hold.lost.clone(),
            _ => own_lease_signal(&hold, opts.held_lease(Duration::MAX)),
        };
        let info = LockInfo::new(hold.key.clone(), token, lost);
        self.cohort_guard(hold, info)
    }

    /// Acquire the lock of `req` through its cohort.
    pub(super) async fn acquire_in_cohort(
        self: &Arc<Self>,
        req: Request<'_>,
    ) -> Result<Option<LockGuard>, LockError> {
        let (key, opts, owner, wait) = (req.key, req.opts, req.owner, req.wait);
        let id = req.id;
        let fifo = opts.mode_value() == Mode::Fair && !opts.cohort_order_value();
        let started = Instant::now();
        let deadline = (opts.wait_timeout_value()).and_then(|t| saturating::deadline(started, t));
        // the wait is over: the lock stayed busy, or the backend is unreachable
        let timeout = || self.wait_over(key, started);
        loop {
            let start = WaitStart {
                mode: opts.mode_value(),
                since: req.began,
            };
            let entered = match self.cohorts.enter(id, owner, (wait, fifo), start) {
                Enter::Ask {
                    leader,
                    ticket,
                    turn,
                } => {
                    // boxed: the compiler's depth limit for the layout of nested futures
                    let asking = Box::pin(self.ask_to_queue(id, leader, ticket, turn));
                    until(deadline, asking).await.ok_or_else(timeout)?
                }
                entered => entered,
            };
            let turn = match entered {
                Enter::Lead(seat, lost) => {
                    if let Some(lost) = lost {
                        self.give_back_lost(lost);
                    }
                    Turn::Lead(seat)
                }
                Enter::Reentered(hold, token) => return Ok(Some(self.held_guard(hold, token))),
                // (a request that had to ask asked already)
                Enter::Alone | Enter::Ask { .. } => Turn::Alone,
                Enter::Busy => return Ok(None),
                Enter::Closed => return Err(LockError::Closed),
                Enter::AfterLeader(settled) => {
                    until(deadline, settled).await.ok_or_else(timeout)?;
                    continue;
                }
                Enter::Queued(mut next) => match until(deadline, &mut next).await {
                    None => return self.queued_wait_ended(key, started, next).await,
                    Some(Err(_)) => return Err(LockError::Closed),
                    Some(Ok(turn)) => turn,
                },
            };
            return self.take_turn(turn, req, started, deadline).await;
        }
    }

    /// Act on `turn`, the cohort's answer to `req` (which began at `started`): hold the lock it
    /// inherited, or take it in the backend, as the cohort's leader or alone, within what is
    /// left of its wait.
    async fn take_turn(
        self: &Arc<Self>,
        turn: Turn,
        req: Request<'_>,
        started: Instant,
        deadline: Option<Instant>,
    ) -> Result<Option<LockGuard>, LockError> {
        let left = || remaining(req.opts, deadline).ok_or_else(|| self.wait_over(req.key, started));
        match turn {
            Turn::Inherit(inheritance) => {
                let held = inheritance.take();
                Ok(held.map(|(hold, token)| self.held_guard(hold, token)))
            }
            Turn::Lead(seat) => self.lead_cohort(seat, req.with_opts(&left()?)).await,
            Turn::Alone => self.acquire_in_backend(req.with_opts(&left()?)).await,
        }
    }

    /// A request keeping FIFO order found `id` held or led by its cohort under `leader`, and
    /// took its place in the cohort's line (`ticket`, `turn`): it keeps that place if nobody but
    /// the leader waits for the lock in the backend. Else it leaves the line (a turn that came
    /// meanwhile goes to the next request) and asks the backend alone, as it does when the
    /// backend cannot be read (the attempt tells why).
    async fn ask_to_queue(
        &self,
        id: &LockId,
        leader: OwnerId,
        ticket: u64,
        turn: oneshot::Receiver<Turn>,
    ) -> Enter {
        match self.backend.queued_behind(id, &leader).await {
            Ok(false) => {
                self.cohorts.admit(id, ticket);
                Enter::Queued(turn)
            }
            Ok(true) | Err(_) => Enter::Alone,
        }
    }

    /// Take the lock in the backend for the cohort, under an owner id of its own (so that no
    /// request of this process re-enters the backend's hold by accident), for `req`.
    async fn lead_cohort(
        self: &Arc<Self>,
        seat: Seat,
        req: Request<'_>,
    ) -> Result<Option<LockGuard>, LockError> {
        let leader = self.new_owner_id();
        seat.leading(&leader);
        let connections = self.waiters.wake_alls();
        let acquired = match self.acquire_in_backend(req.by_leader(&leader)).await {
            // the others' waits would end one after another, each after this one's answer
            Err(err) if !matches!(err, LockError::Timeout { .. }) => {
                seat.disband();
                return Err(err);
            }
            acquired => acquired?,
        };
        let Some(guard) = acquired else {
            return Ok(None);
        };
        let through = Through::Cohort(req.owner.clone());
        if let Some(hold) = guard
            .hold_number()
            .and_then(|n| self.live.adopt(n, through))
        {
            if let Some(left) = seat.established(hold.clone(), connections) {
                self.watch_cohort_hold(hold, left);
            }
        }
        Ok(Some(guard))
    }

    /// How the wait of a request queued in a cohort ends at its deadline. `Timeout` says the lock
    /// stayed busy; when the backend is unreachable, the request is told that instead. The
    /// leader, which began to wait first, meets its deadline first: if its attempt went
    /// unanswered, its verdict comes within moments (`VERDICT`), and is awaited that long. A hand-off
    /// arriving meanwhile is taken: the request got the lock, a little late.
    async fn queued_wait_ended(
        self: &Arc<Self>,
        key: &str,
        started: Instant,
        next: oneshot::Receiver<Turn>,
    ) -> Result<Option<LockGuard>, LockError> {
        let turn = tokio::time::timeout(VERDICT, next).await;
        if let Ok(Ok(Turn::Inherit(inheritance))) = turn {
            let held = inheritance.take();
            return Ok(held.map(|(hold, token)| self.held_guard(hold, token)));
        }
        // a lead handed over now is dropped (passed on): this request's wait is over
        Err(self.wait_over(key, started))
    }

    /// The error of a request whose wait through a cohort ended: `Timeout` (the lock stayed
    /// busy), or `Unavailable` while the backend is known unreachable (the leader's attempt
    /// failed, or went unanswered).
    pub(super) fn wait_over(&self, key: &str, started: Instant) -> LockError {
        if self.outage.is_down() {
            let cause = "the lock backend is unreachable (this process's last attempt failed)";
            return LockError::unavailable(key, cause);
        }
        LockError::Timeout {
            key: key.to_owned(),
            waited: started.elapsed(),
        }
    }

    /// A cohort's hold whose lease was lost, left by its cohort: released in the backend (by its
    /// token, should the lock be held there still), its guards lost.
    /// It may have been handed on: its whole block of tokens counts as used.
    pub(crate) fn give_back_lost(&self, hold: Hold) {
        self.release_held_later(hold, None, ());
    }

    /// The guard of a request holding `hold` (a cohort's) under `token`, with the cohort's lease.
    pub(super) fn held_guard(self: &Arc<Self>, hold: Hold, token: u64) -> LockGuard {
        let info = LockInfo::new(hold.key.clone(), token, hold.lost.clone());
        self.cohort_guard(hold, info)
    }

    /// The guard of a request holding `hold` (a cohort's), as `info` tells.
    pub(super) fn cohort_guard(self: &Arc<Self>, hold: Hold, info: LockInfo) -> LockGuard {
        let number = self.live.insert(hold);
        let held = Releaser {
            shared: self.clone(),
            number,
        };
        LockGuard::new(info, held)
    }

    /// Release `hold`, a cohort's: the next request of this process inherits it, or it goes
    /// back to the backend, by its token. If the caller stops waiting, the release still
    /// completes in the background.
    pub(super) async fn release_in_cohort(
        self: &Arc<Self>,
        hold: Hold,
    ) -> Result<Released, BoxError> {
        let mut released = self.cohorts.release(&hold, self, true);
        if let cohort::Released::Confirm(held) = released {
            self.confirm_hold(&held).await;
            released = self.cohorts.release(&hold, self, false);
        }
        match released {
            cohort::Released::Kept => Ok(Released::StillHeld),
            cohort::Released::NotHeld => Ok(Released::NotHeld),
            cohort::Released::ToBackend(held, last, succession) => {
                self.release_held(held, Some(last), succession).await
            }
            // (not asked for)
            cohort::Released::Confirm(_) => Ok(Released::StillHeld),
        }
    }

    /// [`Self::release_in_cohort`] without waiting (from `Drop`): a confirmation it needs, and
    /// what follows, run in the background.
    pub(crate) fn release_in_cohort_background(self: &Arc<Self>, hold: Hold) {
        match self.cohorts.release(&hold, self, true) {
            cohort::Released::ToBackend(held, last, succession) => {
                self.release_held_later(held, Some(last), succession);
            }
            cohort::Released::Confirm(held) => {
                let shared = self.clone();
                self.background.finish(async move {
                    shared.confirm_hold(&held).await;
                    if let cohort::Released::ToBackend(held, last, succession) =
                        shared.cohorts.release(&hold, &shared, false)
                    {
                        shared.release_held_later(held, Some(last), succession);
                    }
                });
            }
            cohort::Released::Kept | cohort::Released::NotHeld => {}
        }
    }
}

/// How long a request queued in a cohort waits past its deadline for its leader's verdict.
pub(super) const VERDICT: Duration = Duration::from_millis(50);

/// The lost signal of a re-entry into the shared `hold` that keeps it for `lease` at most (a
/// fixed lease, or a ceiling): lost when that ends, or when the shared hold's lease is lost.
fn own_lease_signal(hold: &Hold, lease: Duration) -> Arc<LostSignal> {
    let own = Arc::new(LostSignal::new(
        hold.key.clone(),
        Some(saturating::later(Instant::now(), lease)),
    ));
    let (watched, cohort) = (own.clone(), hold.lost.clone());
    tokio::spawn(async move {
        tokio::select! {
            () = cohort.wait() => watched.fire(),
            () = watched.wait() => {}
        }
    });
    own
}

/// `opts` with the wait left before `deadline`; `None` once it has passed.
pub(super) fn remaining(opts: &LockOptions, deadline: Option<Instant>) -> Option<LockOptions> {
    match deadline {
        Some(deadline) => {
            // a wait with no time left still makes its one attempt (a zero wait takes a free lock)
            let left = deadline.saturating_duration_since(Instant::now());
            Some(opts.wait_timeout(left))
        }
        None => Some(*opts),
    }
}

/// `future`'s output, unless `deadline` passes first (`None`).
pub(super) async fn until<F: std::future::Future>(
    deadline: Option<Instant>,
    future: F,
) -> Option<F::Output> {
    match deadline {
        Some(deadline) => tokio::time::timeout_at(deadline.into(), future).await.ok(),
        None => Some(future.await),
    }
}
