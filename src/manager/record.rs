//! What one acquisition tells the operator: a `tracing` span (a child of the caller's, e.g. the
//! layer's request span) with the lock's key, mode, outcome, wait and token, and the
//! `tower_lock_wait_seconds` histogram. An acquisition dropped before its outcome counts as
//! cancelled.

use std::time::Instant;

use tracing::field::Empty;
use tracing::Span;

use super::LockGuard;
use crate::error::LockError;
use crate::options::Mode;
use crate::telemetry::{self, Outcome};

/// The record of one acquisition, finished by [`AcquisitionRecord::finish`] or, when its caller
/// went away, by its drop.
pub(crate) struct AcquisitionRecord {
    span: Span,
    mode: Mode,
    started: Instant,
    finished: bool,
}

impl AcquisitionRecord {
    pub(crate) fn start(key: &str, mode: Mode) -> Self {
        let mode_label = telemetry::mode_label(mode);
        let span = tracing::debug_span!(
            "lock",
            key,
            mode = mode_label,
            outcome = Empty,
            waited_ms = Empty,
            token = Empty
        );
        AcquisitionRecord {
            span,
            mode,
            started: Instant::now(),
            finished: false,
        }
    }

    /// When the acquisition began.
    pub(crate) fn started(&self) -> Instant {
        self.started
    }

    /// The span the acquisition runs in.
    pub(crate) fn span(&self) -> &Span {
        &self.span
    }

    /// Record how the acquisition ended.
    pub(crate) fn finish(mut self, result: &Result<Option<LockGuard>, LockError>) {
        let outcome = match result {
            Ok(Some(guard)) => {
                self.span.record("token", guard.fencing_token());
                Outcome::Acquired
            }
            Ok(None) => Outcome::Busy,
            Err(LockError::Timeout { .. }) => Outcome::Timeout,
            Err(LockError::Unavailable { .. } | LockError::Closed) => Outcome::Unavailable,
            Err(_) => Outcome::Refused,
        };
        self.end(outcome);
        self.finished = true;
    }

    fn end(&self, outcome: Outcome) {
        let waited = self.started.elapsed();
        self.span.record("outcome", outcome.as_str());
        self.span.record("waited_ms", waited.as_secs_f64() * 1e3);
        telemetry::waited(outcome, self.mode, waited);
    }
}

impl Drop for AcquisitionRecord {
    fn drop(&mut self) {
        if !self.finished {
            self.end(Outcome::Cancelled);
        }
    }
}
