//! The log of a manager's outages: one WARN line when the first of its connections finds the
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
    /// `part` found the backend unreachable (`err` says why): WARN if that begins an outage,
    /// else DEBUG.
    pub(crate) fn lost(&self, part: &str, err: &dyn Display) {
        let mut down = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if !down.parts.iter().any(|p| p == part) {
            down.parts.push(part.to_owned());
        }
        if down.since.is_some() {
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

    /// `part` reached the backend again. The outage ends (one INFO line) when this was the last
    /// part down, or when `whole` says the backend as a whole answers (a request succeeded).
    pub(crate) fn back(&self, part: &str, whole: bool) {
        let mut down = self.state.lock().unwrap_or_else(|p| p.into_inner());
        down.parts.retain(|p| p != part);
        if whole {
            down.parts.clear();
        }
        let Some(since) = down.since.filter(|_| down.parts.is_empty()) else {
            tracing::debug!(part, "reached the lock backend again");
            return;
        };
        down.since = None;
        drop(down);
        tracing::info!(part, after = ?since.elapsed(), "lock backend answers again");
    }
}
