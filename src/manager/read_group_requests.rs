//! How a read request takes and gives back a lock through a read group (see `read_group.rs`): it
//! joins a group, waits for a group's leader, or leads a new one; leaving, the last member
//! releases the group's hold in the backend.

use std::sync::Arc;
use std::time::Instant;

use super::cohort_requests::{remaining, until, VERDICT};
use super::entry::Request;
use super::guard::LockGuard;
use super::live::{Hold, Through};
use super::read_group::{EnterRead, ReadSeat, ReadTurn};
use super::Shared;
use crate::backend::Released;
use crate::error::{BoxError, LockError};
use crate::options::{Lease, LockOptions, Mode};
use crate::saturating;

impl Shared {
    /// Whether a request with `opts` goes through a read group: a read that opted in to cohort
    /// order, kept by the watchdog with no ceiling, on a backend and manager that have cohorts (see
    /// [`Self::cohorted`]).
    pub(super) fn read_grouped(&self, opts: &LockOptions) -> bool {
        self.read_groups.bound > 0
            && opts.mode_value() == Mode::Read
            && opts.cohort_order_value()
            && opts.lease_value() == Lease::Watchdog
            && opts.max_hold_value().is_none()
            && self.backend_has_cohorts()
    }

    /// Acquire a read hold of the lock of `req` through a read group.
    pub(super) async fn acquire_in_read_group(
        self: &Arc<Self>,
        req: Request<'_>,
    ) -> Result<Option<LockGuard>, LockError> {
        let (key, opts, owner, wait) = (req.key, req.opts, req.owner, req.wait);
        let id = req.id;
        let started = Instant::now();
        let deadline = (opts.wait_timeout_value()).and_then(|t| saturating::deadline(started, t));
        let timeout = || self.wait_over(key, started);
        let mut may_confirm = true;
        loop {
            let connections = self.waiters.wake_alls();
            let entered =
                self.read_groups
                    .enter(id, owner, (wait, may_confirm), (connections, req.began));
            let turn = match entered {
                EnterRead::Lead(seat) => {
                    let opts = remaining(opts, deadline).ok_or_else(timeout)?;
                    return self.lead_read_group(seat, req.with_opts(&opts)).await;
                }
                EnterRead::Joined(hold, token) => {
                    return Ok(Some(self.reentered_guard(hold, token, opts)))
                }
                EnterRead::Confirm(hold) => {
                    // one confirmation: what it finds decides whether the group takes members
                    until(deadline, self.confirm_hold(&hold))
                        .await
                        .ok_or_else(timeout)?;
                    may_confirm = false;
                    continue;
                }
                EnterRead::Closed => return Err(LockError::Closed),
                EnterRead::Alone => ReadTurn::Alone,
                EnterRead::Queued(mut next) => match until(deadline, &mut next).await {
                    None => {
                        // the leader began first, so it meets its deadline first: its verdict
                        // comes within moments, and a join is taken even a little late
                        let turn = tokio::time::timeout(VERDICT, next).await;
                        if let Ok(Ok(ReadTurn::Join(membership))) = turn {
                            let held = membership.take();
                            return Ok(held.map(|(hold, token)| self.held_guard(hold, token)));
                        }
                        return Err(timeout());
                    }
                    Some(Err(_)) => return Err(LockError::Closed),
                    Some(Ok(turn)) => turn,
                },
            };
            match turn {
                ReadTurn::Join(membership) => {
                    let held = membership.take();
                    return Ok(held.map(|(hold, token)| self.held_guard(hold, token)));
                }
                ReadTurn::Again => continue,
                ReadTurn::Alone => {
                    let opts = remaining(opts, deadline).ok_or_else(timeout)?;
                    return self.acquire_in_backend(req.with_opts(&opts)).await;
                }
            }
        }
    }

    /// Take the read hold in the backend for a new group, under an owner id of its own, for
    /// `req`.
    async fn lead_read_group(
        self: &Arc<Self>,
        seat: ReadSeat,
        req: Request<'_>,
    ) -> Result<Option<LockGuard>, LockError> {
        let leader = self.new_owner_id();
        let connections = self.waiters.wake_alls();
        let acquiring = self.acquire_in_backend(req.by_leader(&leader));
        let guard = match acquiring.await {
            // the waiting reads would learn it one after another, each after this one's answer
            Err(err) if !matches!(err, LockError::Timeout { .. }) => {
                seat.disband();
                return Err(err);
            }
            Ok(Some(guard)) => guard,
            // busy, or timed out: the seat, dropped, lets the waiting reads enter again
            other => return other,
        };
        let through = Through::ReadGroup(seat.number, req.owner.clone());
        if let Some(hold) = guard
            .hold_number()
            .and_then(|n| self.live.adopt(n, through))
        {
            seat.established(hold, connections, self);
        }
        Ok(Some(guard))
    }

    /// Release `hold`, a read group member's: the group's hold in the backend goes with its last
    /// member, by its token (`lost`: the member's lease may have run out). If the caller stops
    /// waiting, the release still completes in the background.
    pub(super) async fn release_in_read_group(
        self: &Arc<Self>,
        hold: Hold,
        lost: bool,
    ) -> Result<Released, BoxError> {
        let Some(held) = self.leave_read_group(&hold) else {
            // the others hold on; a member whose lease was lost learns it, as any holder would
            return Ok(if lost {
                Released::NotHeld
            } else {
                Released::StillHeld
            });
        };
        self.release_held(held, None, ()).await
    }

    /// [`Self::release_in_read_group`] without waiting (from `Drop`).
    pub(crate) fn release_in_read_group_background(self: &Arc<Self>, hold: Hold) {
        if let Some(held) = self.leave_read_group(&hold) {
            self.release_held_later(held, None, ());
        }
    }

    /// The member holding `hold` leaves its group: the group's hold, when it was the last.
    fn leave_read_group(&self, hold: &Hold) -> Option<Hold> {
        match &hold.through {
            Through::ReadGroup(number, owner) => self.read_groups.leave(&hold.id, *number, owner),
            _ => None,
        }
    }
}
