//! Reading the clients' logs after a run, and checking them against the README's promises
//! ("Guarantees"):
//!
//! - exclusion: two holds of one key (not both reads) overlap only if the earlier holder (the lower token: the
//!   earlier grant) was told its lease was lost before its hold ended; a restart that forgets locks (empty, from a snapshot, from an AOF
//!   cut back) is outside that promise, but the earlier holder must then learn it within one
//!   renewal period of the server coming back;
//! - tokens strictly increase: a hold that starts after another ended has a larger token;
//! - no acquire takes longer than its wait timeout (plus a margin; unless its own process was
//!   frozen meanwhile), and every task ends.
//!
//! Stale writes refused by PostgreSQL are counted: that is fencing doing its job.

use std::path::Path;

use crate::faults::{Fault, Kind};
use crate::{KEYS, LATE_MARGIN, LEASE, TASKS, WAIT};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Write {
    Accepted,
    Refused,
    Failed,
    /// A read hold: it wrote nothing, and excludes writes only.
    Read,
}

#[derive(Debug, Clone)]
pub struct Hold {
    /// Read in the messages of violations (`Debug`).
    #[allow(dead_code)]
    pub client: usize,
    pub key: usize,
    pub token: u64,
    pub start: u64,
    pub end: u64,
    /// When the holder's lost signal was first seen, if it was before the hold ended.
    pub lost: Option<u64>,
    pub write: Write,
}

impl Hold {
    fn told_by(&self, at: u64) -> bool {
        self.lost.is_some_and(|lost| lost <= at)
    }
}

#[derive(Debug, Clone)]
pub struct Acquire {
    pub start: u64,
    pub took: u64,
    pub outcome: String,
}

/// What one client process logged.
#[derive(Debug, Default)]
pub struct ClientLog {
    pub holds: Vec<Hold>,
    pub acquires: Vec<Acquire>,
    /// `(tasks finished, tasks)` from the last line; `None` if the client never wrote it.
    pub done: Option<(usize, usize)>,
    /// The client's index (its log is `client-<index>-<process>.log`).
    pub client: usize,
    /// The process was killed by the fault schedule (and replaced): it reports nothing.
    pub killed: bool,
}

impl ClientLog {
    pub fn read(path: &Path) -> ClientLog {
        let client: usize = path
            .file_stem()
            .and_then(|s| {
                s.to_str()?
                    .strip_prefix("client-")?
                    .split('-')
                    .next()?
                    .parse()
                    .ok()
            })
            .expect("client-N-M.log");
        let text = std::fs::read_to_string(path).unwrap_or_default();
        let mut log = ClientLog {
            client,
            ..ClientLog::default()
        };
        for line in text.lines() {
            let f: Vec<&str> = line.split(' ').collect();
            let n = |i: usize| -> u64 {
                f[i].parse()
                    .unwrap_or_else(|_| panic!("bad line in {}: {line}", path.display()))
            };
            match f[0] {
                "A" if f.len() == 4 => log.acquires.push(Acquire {
                    start: n(1),
                    took: n(2),
                    outcome: f[3].to_owned(),
                }),
                "H" if f.len() == 7 => log.holds.push(Hold {
                    client,
                    key: n(1) as usize,
                    token: n(2),
                    start: n(3),
                    end: n(4),
                    lost: (f[5] != "-").then(|| n(5)),
                    write: match f[6] {
                        "accepted" => Write::Accepted,
                        "refused" => Write::Refused,
                        "read" => Write::Read,
                        _ => Write::Failed,
                    },
                }),
                "DONE" if f.len() == 3 => log.done = Some((n(1) as usize, n(2) as usize)),
                _ => panic!("bad line in {}: {line}", path.display()),
            }
        }
        log
    }
}

/// The counts of one run, and what broke a promise.
#[derive(Debug, Default)]
pub struct Report {
    pub holds: usize,
    pub lost_holds: usize,
    pub reads: usize,
    pub acquires: usize,
    pub timeouts: usize,
    pub unavailable: usize,
    pub accepted: usize,
    pub refused: usize,
    pub refused_unaware: usize,
    pub failed_writes: usize,
    pub overlaps: usize,
    pub overlaps_told: usize,
    pub overlaps_after_forgetting: usize,
    pub violations: usize,
    pub token_inversions: usize,
    pub late_acquires: usize,
    pub late_while_frozen: usize,
    pub hung_tasks: usize,
    pub problems: Vec<String>,
}

fn overlaps(span: (u64, u64), fault: &Fault) -> bool {
    span.0 < fault.end && fault.start < span.1
}

pub fn check(logs: &[ClientLog], faults: &[Fault]) -> Report {
    let mut r = Report::default();
    for (index, log) in logs.iter().enumerate() {
        // the log's process: the client's index, and which of its processes (a killed client is
        // started again)
        let client = format!("{} (log {index})", log.client);
        match log.done {
            None if log.killed => {}
            None => r
                .problems
                .push(format!("client {client} did not report its tasks")),
            Some((finished, tasks)) if finished < tasks => {
                r.hung_tasks += tasks - finished;
                r.problems.push(format!(
                    "client {client}: {} of {TASKS} tasks hung",
                    tasks - finished
                ));
            }
            Some(_) => {}
        }
        for a in &log.acquires {
            r.acquires += 1;
            match a.outcome.as_str() {
                "ok" => {}
                "timeout" => r.timeouts += 1,
                "unavailable" => r.unavailable += 1,
                other => r.problems.push(format!(
                    "client {client}: acquire failed unexpectedly: {other}"
                )),
            }
            if a.took > (WAIT + LATE_MARGIN).as_nanos() as u64 {
                let frozen = faults.iter().any(|f| {
                    f.kind == Kind::PauseClient
                        && f.target == log.client
                        && overlaps((a.start, a.start + a.took), f)
                });
                if frozen {
                    r.late_while_frozen += 1;
                } else {
                    r.late_acquires += 1;
                    r.problems.push(format!(
                        "client {client}: an acquire started at {} returned after {:.2} s",
                        a.start,
                        a.took as f64 / 1e9
                    ));
                }
            }
        }
    }
    let holds: Vec<&Hold> = logs.iter().flat_map(|l| &l.holds).collect();
    r.holds = holds.len();
    for h in &holds {
        r.lost_holds += usize::from(h.lost.is_some());
        match h.write {
            Write::Accepted => r.accepted += 1,
            Write::Refused => {
                r.refused += 1;
                r.refused_unaware += usize::from(h.lost.is_none());
            }
            Write::Failed => r.failed_writes += 1,
            Write::Read => r.reads += 1,
        }
    }
    for key in 0..KEYS {
        let mut of_key: Vec<&Hold> = holds.iter().copied().filter(|h| h.key == key).collect();
        of_key.sort_by_key(|h| h.start);
        check_exclusion(&of_key, faults, &mut r);
        check_tokens(&of_key, &mut r);
    }
    r
}

/// Overlapping holds of one key (sorted by start), but two reads.
fn check_exclusion(holds: &[&Hold], faults: &[Fault], r: &mut Report) {
    // the lost signal reaches a holder within one renewal period of the server coming back
    let renewal = (LEASE / 3 + LATE_MARGIN).as_nanos() as u64;
    for (i, a) in holds.iter().enumerate() {
        for b in holds[i + 1..].iter().take_while(|b| b.start < a.end) {
            if a.write == Write::Read && b.write == Write::Read {
                continue;
            }
            r.overlaps += 1;
            // The earlier grant is the one with the lower token: a hold whose process froze
            // between its grant and its first log (its lease ran out meanwhile) starts late.
            let (first, then) = if b.token < a.token { (b, a) } else { (a, b) };
            if first.told_by(first.end) {
                r.overlaps_told += 1;
                continue;
            }
            let forgetting = faults
                .iter()
                .find(|f| f.kind.forgets_locks() && first.start < f.end && then.start > f.start);
            match forgetting {
                Some(f) => {
                    r.overlaps_after_forgetting += 1;
                    if first.end > f.end + renewal && !first.told_by(f.end + renewal) {
                        r.violations += 1;
                        r.problems.push(format!(
                            "key {}: holder not told within a renewal period after {} ended at {}: \
                             {first:?} overlaps {then:?}",
                            first.key,
                            f.kind.name(),
                            f.end
                        ));
                    }
                }
                None => {
                    r.violations += 1;
                    r.problems.push(format!(
                        "key {}: overlap, the earlier holder never told: {first:?} and {then:?}",
                        first.key
                    ));
                }
            }
        }
    }
}

/// A hold that starts after another ended has a larger token (holds told lost aside: their start
/// may have been logged late), unless both are reads: reads exclude nothing of each other, and a
/// read that joins its process's read hold takes the next token of that hold's block, whatever
/// other processes' reads took since (README, "Lock cohorting").
fn check_tokens(holds: &[&Hold], r: &mut Report) {
    let (all, writes) = (
        highest_ended(holds, |_| true),
        highest_ended(holds, |h| h.write != Write::Read),
    );
    for b in holds.iter().filter(|h| h.lost.is_none()) {
        let highest = if b.write == Write::Read {
            &writes
        } else {
            &all
        };
        let ended_before = highest.partition_point(|(end, _)| *end < b.start);
        if ended_before > 0 && highest[ended_before - 1].1 >= b.token {
            r.token_inversions += 1;
            r.problems.push(format!(
                "key {}: token {} of a hold that started after one with token {} ended: {b:?}",
                b.key,
                b.token,
                highest[ended_before - 1].1
            ));
        }
    }
}

/// The largest token among the holds chosen by `counted` that ended by each end time, in order of
/// end (holds told lost aside).
fn highest_ended(holds: &[&Hold], counted: impl Fn(&Hold) -> bool) -> Vec<(u64, u64)> {
    let mut by_end: Vec<&Hold> = (holds.iter().copied())
        .filter(|h| h.lost.is_none() && counted(h))
        .collect();
    by_end.sort_by_key(|h| h.end);
    let mut highest: Vec<(u64, u64)> = Vec::with_capacity(by_end.len());
    for h in &by_end {
        let before = highest.last().map_or(0, |(_, t)| *t);
        highest.push((h.end, before.max(h.token)));
    }
    highest
}

impl Report {
    pub fn print(&self) {
        println!(
            "acquires: {} ({} timed out, {} unavailable), {} later than wait timeout + {LATE_MARGIN:?} \
             ({} more while their process was frozen); hung tasks: {}",
            self.acquires,
            self.timeouts,
            self.unavailable,
            self.late_acquires,
            self.late_while_frozen,
            self.hung_tasks
        );
        println!(
            "holds: {} ({} told lost, {} reads); fenced writes: {} accepted, {} refused for a stale token \
             ({} of them by holders never told lost), {} failed",
            self.holds,
            self.lost_holds,
            self.reads,
            self.accepted,
            self.refused,
            self.refused_unaware,
            self.failed_writes
        );
        println!(
            "overlapping holds: {} ({} after the earlier holder was told lost, {} across a restart \
             that forgot the lock); violations: {}; token inversions: {}",
            self.overlaps,
            self.overlaps_told,
            self.overlaps_after_forgetting,
            self.violations,
            self.token_inversions
        );
    }
}
