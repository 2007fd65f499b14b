//! `tower-lock watch`: the locks under a prefix, read again every second, on a screen redrawn in
//! place; without a terminal, one table after the other.
//!
//! A failed read shows its error instead of the last table, which would be stale, and the next
//! second reads again: a short outage does not end the watch.

use std::io::IsTerminal;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tower_lock::LockManager;

use crate::commands::nothing_under;
use crate::connect::Target;
use crate::failure::Failure;
use crate::screen::{Input, Screen};
use crate::{describe, output, table};

/// How often the locks are read again.
const PERIOD: Duration = Duration::from_secs(1);

/// What one `watch` reads and how it names it.
pub struct Watch<'a> {
    /// The manager that reads.
    pub manager: &'a LockManager,
    /// Where the locks are.
    pub target: &'a Target,
    /// Only the locks whose names start with this.
    pub prefix: &'a str,
    /// At most this many locks.
    pub limit: usize,
}

impl Watch<'_> {
    /// Watch until `q` or Ctrl-C (or, without a terminal, a signal to stop).
    pub async fn run(&self) -> Result<(), Failure> {
        if std::io::stdout().is_terminal() {
            match Screen::enter() {
                Ok((screen, inputs)) => return self.on_screen(screen, inputs).await,
                Err(err) => output::note(&format!("no live screen ({err}): printing tables")),
            }
        }
        self.as_text().await
    }

    async fn on_screen(
        &self,
        mut screen: Screen,
        mut inputs: tokio::sync::mpsc::UnboundedReceiver<Input>,
    ) -> Result<(), Failure> {
        let mut ticks = tokio::time::interval(PERIOD);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut lines = Vec::new();
        let stop = stopped();
        tokio::pin!(stop);
        loop {
            tokio::select! {
                _ = ticks.tick() => {
                    // a read that waits for a frozen server must not keep `q` waiting
                    tokio::select! {
                        read = self.lines("  (q quits)") => lines = read,
                        input = inputs.recv() => if input != Some(Input::Redraw) { return Ok(()) },
                        () = &mut stop => return Ok(()),
                    }
                }
                input = inputs.recv() => if input != Some(Input::Redraw) { return Ok(()) },
                () = &mut stop => return Ok(()),
            }
            screen
                .draw(&lines)
                .map_err(|e| Failure::runtime(format!("cannot draw on the terminal: {e}")))?;
        }
    }

    async fn as_text(&self) -> Result<(), Failure> {
        let mut ticks = tokio::time::interval(PERIOD);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let stop = stopped();
        tokio::pin!(stop);
        loop {
            tokio::select! {
                _ = ticks.tick() => {}
                () = &mut stop => return Ok(()),
            }
            let mut lines = self.lines("").await;
            lines.push(String::new());
            output::lines(lines)?;
        }
    }

    /// The title (ending with `hint`) and the table of the locks now, or the error that kept
    /// them from being read.
    async fn lines(&self, hint: &str) -> Vec<String> {
        let title = format!(
            "tower-lock watch  {}  namespace {}  prefix {:?}  {} UTC{hint}",
            self.target.shown(),
            describe::printable(&self.target.namespace),
            describe::printable(self.prefix),
            clock(SystemTime::now()),
        );
        let mut lines = vec![title, String::new()];
        match self.manager.list_limited(self.prefix, self.limit).await {
            Ok(states) if states.is_empty() => lines.push(nothing_under(self.prefix)),
            Ok(states) => {
                lines.extend(table::render(&states));
                let queues = table::queues(&states);
                if !queues.is_empty() {
                    lines.extend([String::new(), "WAITING, first in line first".to_owned()]);
                    lines.extend(queues);
                }
                if states.len() >= self.limit {
                    lines.push(format!(
                        "(the first {} locks; --limit N shows more)",
                        self.limit
                    ));
                }
            }
            Err(err) => {
                lines.push(self.target.failure(&err).message);
                lines.push("(reading again every second)".to_owned());
            }
        }
        lines
    }
}

/// Resolves when the process is told to stop: Ctrl-C outside raw mode, or (on Unix) SIGTERM or
/// SIGHUP; never when no handler could be set up.
async fn stopped() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let (term, hup) = (
            signal(SignalKind::terminate()),
            signal(SignalKind::hangup()),
        );
        if let (Ok(mut term), Ok(mut hup)) = (term, hup) {
            tokio::select! {
                _ = term.recv() => return,
                _ = hup.recv() => return,
                _ = tokio::signal::ctrl_c() => return,
            }
        }
    }
    if tokio::signal::ctrl_c().await.is_err() {
        std::future::pending::<()>().await;
    }
}

/// `time` as `HH:MM:SS` of its UTC day.
fn clock(time: SystemTime) -> String {
    let seconds = time.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs()) % 86_400;
    format!(
        "{:02}:{:02}:{:02}",
        seconds / 3_600,
        seconds % 3_600 / 60,
        seconds % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_clock_shows_the_utc_time_of_day() {
        let time = UNIX_EPOCH + Duration::from_secs(86_400 * 3 + 3_600 * 8 + 60 * 40 + 5);
        assert_eq!(clock(time), "08:40:05");
    }
}
