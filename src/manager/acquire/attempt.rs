//! One attempt of an acquisition: its turn among the owner's attempts on the lock, its backend
//! call (finished in the background, and undone if it won, should the caller go away), and what
//! its answer, or its silence at the deadline, tells.

use std::time::{Duration, Instant};

use super::{Acquisition, SLOW_ANSWER};
use crate::backend::{AcquireRequest, Attempt};
use crate::background::{MustComplete, Undo, Work};
use crate::error::{BoxError, LockError};
use crate::ids::OwnerId;
use crate::manager::ticket::WaitTicket;
use crate::manager::Shared;
use crate::options::Mode;
use crate::waiters::LockId;

impl Acquisition<'_> {
    /// One attempt, bounded by the backend's attempt timeout and the wait deadline. It waits for
    /// its turn among the owner's attempts on the lock (see `turns.rs`), which it keeps when it
    /// took the lock.
    pub(super) async fn attempt(&mut self) -> Result<Attempt, LockError> {
        self.turn = None;
        let mut held = None;
        if !self.leader {
            // a leader's id is made for one hold: it has no other attempt, and holds nothing
            let turn = self.shared.turns.take(&self.id, self.owner, self.deadline);
            self.turn = Some(turn.await.ok_or_else(|| self.leaving(self.timeout()))?);
            held = self.shared.live.held_token(&self.id, self.owner);
        }
        let call = within(self.shared.backend.attempt_timeout(), self.call(held));
        let sent = Instant::now();
        // a wait too short for a round trip (zero) gets its first answer, as `try_acquire` does
        let first = self.busy_attempts == 0 && self.deadline.is_some_and(|d| d <= sent);
        let attempt = match self.deadline.filter(|_| !first) {
            Some(deadline) => (tokio::time::timeout_at(deadline.into(), call).await)
                .map_err(|_| self.unanswered_at_deadline(sent))?,
            None => call.await,
        };
        if !matches!(attempt, Ok(Attempt::Acquired { .. })) {
            self.turn = None;
        }
        match attempt {
            Ok(attempt) => {
                self.shared.outage.answered();
                Ok(attempt)
            }
            Err(err) => {
                let err = LockError::unavailable(self.key, err);
                self.shared.outage.failed(&err);
                Err(self.leaving(err))
            }
        }
    }

    /// The wait ended while the attempt sent at `sent` was unanswered. `Timeout` says the lock
    /// stayed busy, which only the backend can tell: when no attempt was answered, or this one was
    /// out for longer than a live server takes, the backend is the problem (`Unavailable`).
    fn unanswered_at_deadline(&self, sent: Instant) -> LockError {
        let out = sent.elapsed();
        if self.busy_attempts > 0 && out < SLOW_ANSWER {
            return self.timeout();
        }
        let cause = format!(
            "no answer from the lock backend within the wait ({out:?} for the last attempt)"
        );
        let err = LockError::unavailable(self.key, cause);
        self.shared.outage.failed(&err);
        self.leaving(err)
    }

    /// The attempt's backend call, finished in the background (and released if it won) should
    /// the caller go away; `held`: the token of the owner's hold of the lock, if it has one.
    fn call(&self, held: Option<u64>) -> MustComplete<Result<Attempt, BoxError>> {
        let backend = self.shared.backend.clone();
        let (id, owner) = (self.id.clone(), self.owner.clone());
        let waiter = self
            .ticket
            .as_ref()
            .map_or(self.owner.as_arc(), WaitTicket::name)
            .clone();
        let (lease, mode, will_wait) = (self.lease, self.mode, self.ticket.is_some());
        let others_waiting = self.ticket.as_ref().is_some_and(WaitTicket::others_waiting);
        let queued = self.ticket.as_ref().is_some_and(WaitTicket::is_queued);
        let (leader, turn) = (self.leader, self.turn.clone());
        let (label, request) = (self.shared.label.clone(), self.request.clone());
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
                leader,
                held,
                label: &label,
                request: request.as_deref(),
            };
            let attempt = backend.try_acquire(&req).await;
            // answered: what it did in the backend is done, and an attempt that follows sees it
            drop(turn);
            attempt
        });
        let undo = release_if_won(self.shared, &self.id, self.owner, mode);
        MustComplete::new(call, &self.shared.background).with_undo(undo)
    }
}

/// The undo of an attempt whose caller went away: release the lock if the attempt took it.
fn release_if_won(
    shared: &Shared,
    id: &LockId,
    owner: &OwnerId,
    mode: Mode,
) -> Undo<Result<Attempt, BoxError>> {
    let (backend, id, owner) = (shared.backend.clone(), id.clone(), owner.clone());
    Box::new(move |out| -> Option<Work> {
        match out {
            Ok(Attempt::Acquired { token }) => Some(Box::pin(async move {
                let _ = backend.release(&id, &owner, mode, token, Some(token)).await;
            })),
            _ => None,
        }
    })
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
