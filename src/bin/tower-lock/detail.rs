//! The text of `show`: one lock's state, every holder and every waiter in queue order.

use tower_lock::LockState;

use crate::describe::{self, NONE};
use crate::table::aligned;

const HOLDER_HEADER: [&str; 8] = [
    "OWNER",
    "LABEL",
    "MODE",
    "TOKEN",
    "COUNT",
    "HELD FOR",
    "LEASE LEFT",
    "REQUEST",
];

const WAITER_HEADER: [&str; 5] = ["#", "WAITER", "LABEL", "MODE", "WAITED"];

/// The lines that describe `state`.
pub fn render(state: &LockState) -> Vec<String> {
    let mut lines = vec![
        format!("lock        {}", describe::printable(&state.key)),
        format!("state       {}", summary(state)),
        format!(
            "family      {}",
            state
                .family
                .map_or(NONE.to_owned(), |f| match describe::permits(Some(f)) {
                    Some(n) => format!("semaphore of {n}"),
                    None => describe::family(f).to_owned(),
                })
        ),
        format!(
            "last token  {}",
            state.last_token.map_or(NONE.to_owned(), |t| t.to_string())
        ),
    ];
    if !state.holders.is_empty() {
        lines.push(String::new());
        lines.push("holders".to_owned());
        lines.extend(indented(aligned(&HOLDER_HEADER, &holder_rows(state))));
    }
    if !state.waiters.is_empty() {
        lines.push(String::new());
        lines.push("waiters, in queue order".to_owned());
        lines.extend(indented(aligned(&WAITER_HEADER, &waiter_rows(state))));
    }
    lines
}

/// `held (1 holder, 2 waiting)`, `free`, or `free (2 waiting: ...)`.
fn summary(state: &LockState) -> String {
    let (holders, waiters) = (state.holders.len(), state.waiters.len());
    let holders_text = if holders == 1 { "holder" } else { "holders" };
    match (holders, waiters) {
        (0, 0) => "free".to_owned(),
        (0, n) => format!("free ({n} waiting: a grant is on its way to the first)"),
        (h, 0) => format!("held ({h} {holders_text})"),
        (h, n) => format!("held ({h} {holders_text}, {n} waiting)"),
    }
}

fn holder_rows(state: &LockState) -> Vec<Vec<String>> {
    let token = |t: Option<u64>| t.map_or(NONE.to_owned(), |t| t.to_string());
    state
        .holders
        .iter()
        .map(|h| {
            vec![
                describe::printable(&h.owner),
                describe::printable(&describe::or_none(h.label.as_deref())),
                describe::mode(h.mode).to_owned(),
                token(h.token),
                h.count.to_string(),
                describe::maybe_duration(h.held_for),
                describe::maybe_duration(h.lease_left),
                describe::printable(&describe::or_none(h.request.as_deref())),
            ]
        })
        .collect()
}

fn waiter_rows(state: &LockState) -> Vec<Vec<String>> {
    (state.waiters.iter().enumerate())
        .map(|(i, w)| {
            vec![
                (i + 1).to_string(),
                describe::printable(&w.waiter),
                describe::printable(&describe::or_none(w.label.as_deref())),
                describe::mode(w.mode).to_owned(),
                describe::maybe_duration(w.waited),
            ]
        })
        .collect()
}

fn indented(lines: Vec<String>) -> impl Iterator<Item = String> {
    lines.into_iter().map(|line| format!("  {line}"))
}
