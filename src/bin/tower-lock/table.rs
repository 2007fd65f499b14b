//! The table of `list` and `watch`: one lock a line, with its first holder, how long it has held
//! and has left, and how many wait and for how long.
//!
//! One line per lock keeps a busy namespace readable; `show` gives every holder and waiter.

use tower_lock::{LockState, Mode};

use crate::describe::{self, NONE};

/// The columns of the table.
pub const HEADER: [&str; 8] = [
    "LOCK",
    "MODE",
    "HOLDER",
    "REQUEST",
    "HELD FOR",
    "LEASE LEFT",
    "WAITERS",
    "OLDEST WAIT",
];

/// The cells of one lock's line.
pub fn row(state: &LockState) -> Vec<String> {
    let first = state.holders.first();
    let holder = match (first, state.holders.len()) {
        (None, _) => "(free)".to_owned(),
        (Some(h), 1) => describe::holder_name(h),
        (Some(h), n) => format!("{} +{}", describe::holder_name(h), n - 1),
    };
    let oldest_wait = state.waiters.iter().filter_map(|w| w.waited).max();
    vec![
        describe::printable(&state.key),
        mode_cell(state),
        describe::printable(&holder),
        describe::printable(&describe::or_none(first.and_then(|h| h.request.as_deref()))),
        describe::maybe_duration(first.and_then(|h| h.held_for)),
        describe::maybe_duration(first.and_then(|h| h.lease_left)),
        state.waiters.len().to_string(),
        describe::maybe_duration(oldest_wait),
    ]
}

/// The mode the lock is held in (`semaphore 2/3` for permits), else the one it is waited for.
fn mode_cell(state: &LockState) -> String {
    let mut modes = state.holders.iter().map(|h| h.mode);
    if let Some(first) = modes.next() {
        if let Mode::Semaphore(n) = first {
            return format!("semaphore {}/{n}", state.holders.len());
        }
        return if modes.all(|m| m == first) {
            describe::mode(first).to_owned()
        } else {
            "mixed".to_owned()
        };
    }
    match (state.family, state.waiters.first()) {
        (Some(family), _) => describe::family(family).to_owned(),
        (None, Some(waiter)) => describe::mode(waiter.mode).to_owned(),
        (None, None) => NONE.to_owned(),
    }
}

/// `rows` under `header`, each column as wide as its widest cell, two spaces apart.
pub fn aligned(header: &[&str], rows: &[Vec<String>]) -> Vec<String> {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let header: Vec<String> = header.iter().map(|h| (*h).to_owned()).collect();
    std::iter::once(&header)
        .chain(rows)
        .map(|row| line(row, &widths))
        .collect()
}

fn line(cells: &[String], widths: &[usize]) -> String {
    let mut out = String::new();
    for (i, (cell, width)) in cells.iter().zip(widths).enumerate() {
        if i + 1 == cells.len() {
            out.push_str(cell);
        } else {
            let pad = width - cell.chars().count();
            out.push_str(cell);
            out.extend(std::iter::repeat_n(' ', pad + 2));
        }
    }
    out
}

/// The table of `states`, header first.
pub fn render(states: &[LockState]) -> Vec<String> {
    let rows: Vec<Vec<String>> = states.iter().map(row).collect();
    aligned(&HEADER, &rows)
}

/// How many waiters of one lock [`queues`] names; the rest are counted.
const WAITERS_NAMED: usize = 5;

/// One line per lock with waiters: who waits, first in line first, with its mode and wait.
pub fn queues(states: &[LockState]) -> Vec<String> {
    let waited = states.iter().filter(|s| !s.waiters.is_empty());
    waited
        .map(|state| {
            let named = state.waiters.iter().take(WAITERS_NAMED).enumerate();
            let mut parts: Vec<String> = named
                .map(|(i, w)| {
                    let name = describe::printable(&describe::waiter_name(w));
                    let waited = describe::maybe_duration(w.waited);
                    format!("{}. {name} {} {waited}", i + 1, describe::mode(w.mode))
                })
                .collect();
            if state.waiters.len() > WAITERS_NAMED {
                parts.push(format!("+{} more", state.waiters.len() - WAITERS_NAMED));
            }
            format!(
                "{}  <-  {}",
                describe::printable(&state.key),
                parts.join(", ")
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use tower_lock::{LockManager, LockOptions};

    /// The row of `key` while two owners of one memory manager hold it with `options`.
    async fn row_of_two_holds(options: LockOptions) -> Vec<String> {
        let manager = LockManager::memory();
        let first = manager.owner().acquire("k", &options).await.expect("first");
        let second = manager
            .owner()
            .acquire("k", &options)
            .await
            .expect("second");
        let row = row(&manager.inspect("k").await.expect("inspect"));
        drop((first, second));
        row
    }

    #[tokio::test]
    async fn shared_holds_show_their_mode_and_how_many_more_hold() {
        let reads = row_of_two_holds(LockOptions::read()).await;
        assert_eq!(reads[1], "read");
        assert!(reads[2].ends_with(" +1"), "{reads:?}");
        let permits = row_of_two_holds(LockOptions::semaphore(3)).await;
        assert_eq!(permits[1], "semaphore 2/3");
        assert_eq!(permits[6], "0", "nobody waits");
    }

    #[tokio::test]
    async fn a_free_lock_is_said_free() {
        let manager = LockManager::memory();
        let cells = row(&manager.inspect("k").await.expect("inspect"));
        assert_eq!(cells[0], "k");
        assert_eq!(cells[2], "(free)");
        assert_eq!(cells[3..], ["-", "-", "-", "0", "-"]);
    }

    #[test]
    fn columns_line_up_under_their_header() {
        let rows = vec![
            vec!["a".to_owned(), "long cell".to_owned(), "x".to_owned()],
            vec!["bbbbbb".to_owned(), "c".to_owned(), "y".to_owned()],
        ];
        let lines = aligned(&["K", "M", "Z"], &rows);
        assert_eq!(
            lines,
            [
                "K       M          Z",
                "a       long cell  x",
                "bbbbbb  c          y"
            ]
        );
    }
}
