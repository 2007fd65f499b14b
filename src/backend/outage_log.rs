//! The log of a manager's outages: one WARN line when the first of its parts finds the
//! backend unreachable, DEBUG lines while it stays so (other connections failing, reconnect
//! attempts, failed requests), and one INFO line when it answers again. The inboxes and the
//! manager's requests report here, so that a Redis restart is one WARN line, not one per
//! reconnect attempt of each connection.

use std::fmt::Display;
use std::sync::Mutex;
use std::time::Instant;

/// What is down now, and since when.
#[derive(Debug, Default)]
pub(crate) struct OutageLog {
    state: Mutex<Down>,
}

#[derive(Debug, Default)]
struct Down {
    /// The parts that found the backend unreachable (`requests`, `inbox of host:port`).
    parts: Vec<String>,
    /// When the outage began (`None`: no outage).
    since: Option<Instant>,
}

impl OutageLog {
    /// The connection `part` (an inbox) lost the backend (`err` says why): WARN if that begins
    /// an outage, else DEBUG. The outage lasts at least until `part` is [`back`](Self::back): a
    /// connection keeps trying until it is.
    pub(crate) fn lost(&self, part: &str, err: &dyn Display) {
        let mut down = self.lock();
        if !down.parts.iter().any(|p| p == part) {
            down.parts.push(part.to_owned());
        }
        Self::begin(down, part, err);
    }

    /// `part`, which tries again only when it has work (requests, the watchdog's rounds), could
    /// not reach the backend: WARN if that begins an outage, else DEBUG. Its next success ends
    /// the outage ([`answered`](Self::answered)); so does the last connection that comes back.
    pub(crate) fn failed(&self, part: &str, err: &dyn Display) {
        Self::begin(self.lock(), part, err);
    }

    fn begin(mut down: std::sync::MutexGuard<'_, Down>, part: &str, err: &dyn Display) {
        if down.since.is_some() {
            drop(down);
            tracing::debug!(part, error = %err, "lock backend still unreachable");
            return;
        }
        down.since = Some(Instant::now());
        drop(down);
        tracing::warn!(
            part,
            error = %err,
            "lock backend unreachable; retries and further failures are logged at DEBUG until it \
             answers"
        );
    }

    /// A failure of `part` during an outage it already reported (a reconnect attempt): DEBUG.
    pub(crate) fn retry_failed(&self, part: &str, err: &dyn Display) {
        tracing::debug!(part, error = %err, "lock backend still unreachable");
    }

    /// The connection `part` reached the backend again: the outage ends (one INFO line) if no
    /// other connection is still down.
    pub(crate) fn back(&self, part: &str) {
        let mut down = self.lock();
        let before = down.parts.len();
        down.parts.retain(|p| p != part);
        if down.parts.len() == before {
            return;
        }
        Self::end_if_whole(down, part);
    }

    /// `part` (requests, a watchdog round) was answered: the backend as a whole answers, and an
    /// outage ends (one INFO line). Nothing is logged outside an outage.
    pub(crate) fn answered(&self, part: &str) {
        let mut down = self.lock();
        if down.since.is_none() {
            return;
        }
        down.parts.clear();
        Self::end_if_whole(down, part);
    }

    fn end_if_whole(mut down: std::sync::MutexGuard<'_, Down>, part: &str) {
        let Some(since) = down.since.filter(|_| down.parts.is_empty()) else {
            drop(down);
            tracing::debug!(part, "reached the lock backend again");
            return;
        };
        down.since = None;
        drop(down);
        tracing::info!(part, after = ?since.elapsed(), "lock backend answers again");
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Down> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}
