//! Where an acquisition starts: its record (span and metrics), the closing check, and its route —
//! a re-entry of a lock the owner holds through its cohort, the cohort of the lock, or the backend
//! itself.

use std::sync::Arc;
use std::time::Instant;

use tracing::Instrument;

use super::guard::LockGuard;
use super::record::AcquisitionRecord;
use super::refusal::NO_UPGRADE;
use super::Shared;
use crate::error::LockError;
use crate::ids::{LockId, OwnerId};
use crate::key::LockKey;
use crate::options::{LockOptions, Mode};

/// What one acquisition asks for, as each route passes it on.
#[derive(Debug, Clone, Copy)]
pub(super) struct Request<'a> {
    /// The lock name, as given.
    pub(super) key: &'a str,
    /// The backend's name for the lock, made once per request.
    pub(super) id: &'a LockId,
    pub(super) opts: &'a LockOptions,
    pub(super) owner: &'a OwnerId,
    /// The request the owner serves (`LockOwner::request`).
    pub(super) request: Option<&'a Arc<str>>,
    /// Whether it may wait (else one attempt: `Ok(None)` when busy).
    pub(super) wait: bool,
    /// Whether `owner` is a leader's id, made for this one hold (see `AcquireRequest`).
    pub(super) leader: bool,
    /// When the acquisition began (its waits are counted from here in the oldest-wait gauge).
    pub(super) began: Instant,
}

impl<'a> Request<'a> {
    /// The same request, with `opts`.
    pub(super) fn with_opts(self, opts: &'a LockOptions) -> Self {
        Request { opts, ..self }
    }

    /// The same request, made by a cohort's or a read group's leader under its own id `owner`.
    pub(super) fn by_leader(self, owner: &'a OwnerId) -> Self {
        Request {
            owner,
            leader: true,
            ..self
        }
    }
}

impl Shared {
    /// Acquire `key` for `owner` (its id, and the request it serves); with `wait` false, one
    /// attempt only (`Ok(None)` when busy).
    pub(crate) async fn acquire(
        self: &Arc<Self>,
        key: &str,
        opts: &LockOptions,
        owner: (&OwnerId, Option<&Arc<str>>),
        wait: bool,
    ) -> Result<Option<LockGuard>, LockError> {
        let record = AcquisitionRecord::start(key, opts.mode_value());
        let acquiring = self.acquire_recorded(key, opts, owner, (wait, record.started()));
        let result = acquiring.instrument(record.span().clone()).await;
        record.finish(&result);
        result
    }

    async fn acquire_recorded(
        self: &Arc<Self>,
        key: &str,
        opts: &LockOptions,
        (owner, request): (&OwnerId, Option<&Arc<str>>),
        (wait, began): (bool, Instant),
    ) -> Result<Option<LockGuard>, LockError> {
        let lock_key = LockKey::new(key)?;
        let Some(_running) = self.closing.enter() else {
            return Err(LockError::Closed);
        };
        self.start();
        let id = self.backend.lock_id(&lock_key);
        let req = Request {
            key,
            id: &id,
            opts,
            owner,
            request,
            wait,
            leader: false,
            began,
        };
        match opts.mode_value() {
            Mode::Exclusive | Mode::Fair => {
                if let Some(guard) = self.reenter_cohort(&id, owner, opts) {
                    return Ok(Some(guard));
                }
                // an owner holding the lock in the backend itself re-enters it there
                if self.cohorted(opts) && !self.live.holds_directly(&id, owner) {
                    return self.acquire_in_cohort(req).await;
                }
            }
            // a member's re-entry joins its group, whatever its options: in the backend it would
            // queue behind a write that waits for the member's first read
            Mode::Read
                if (self.read_grouped(opts) || self.read_groups.is_member(&id, owner))
                    && !self.live.holds_directly(&id, owner) =>
            {
                return self.acquire_in_read_group(req).await;
            }
            Mode::Write if self.read_groups.is_member(&id, owner) => {
                let what = NO_UPGRADE.to_owned();
                return Err(LockError::Unsupported {
                    key: key.to_owned(),
                    what,
                });
            }
            _ => {}
        }
        self.acquire_in_backend(req).await
    }
}
