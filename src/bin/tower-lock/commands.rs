//! The one-shot commands of `tower-lock`: `list`, `show` and `release`, each one or two calls
//! of the manager, printed as text or JSON.

use std::io::IsTerminal;

use tower_lock::{LockManager, LockState};

use crate::connect::Target;
use crate::describe;
use crate::failure::Failure;
use crate::{detail, json, output, table};

/// Print the locks under `prefix` that are held or waited for, `limit` at most.
pub async fn list(
    manager: &LockManager,
    target: &Target,
    prefix: &str,
    limit: usize,
    as_json: bool,
) -> Result<(), Failure> {
    let states = (manager.list_limited(prefix, limit).await).map_err(|e| target.failure(&e))?;
    if as_json {
        let document = json::list(&target.namespace, prefix, limit, &states);
        return output::lines([pretty(&document)]);
    }
    if states.is_empty() {
        return output::lines([nothing_under(prefix)]);
    }
    output::lines(table::render(&states))?;
    if states.len() >= limit {
        output::note(&format!(
            "(the first {limit} locks found; --limit N shows more)"
        ));
    }
    Ok(())
}

/// What `list` and `watch` say when no lock is in use under `prefix`.
pub fn nothing_under(prefix: &str) -> String {
    format!(
        "no lock under {:?} is held or waited for",
        describe::printable(prefix)
    )
}

/// Print the state of lock `key`: its holders and its waiters in queue order.
pub async fn show(
    manager: &LockManager,
    target: &Target,
    key: &str,
    as_json: bool,
) -> Result<(), Failure> {
    let state = manager.inspect(key).await.map_err(|e| target.failure(&e))?;
    if as_json {
        output::lines([pretty(&json::state(&state))])
    } else {
        output::lines(detail::render(&state))
    }
}

/// Whether `release` could ask for confirmation: it reads the answer from a terminal.
pub fn can_confirm() -> bool {
    std::io::stdin().is_terminal()
}

/// End every hold of lock `key`, after showing them and, unless `yes`, asking.
pub async fn release(
    manager: &LockManager,
    target: &Target,
    key: &str,
    yes: bool,
) -> Result<(), Failure> {
    let before = manager.inspect(key).await.map_err(|e| target.failure(&e))?;
    let shown = describe::printable(key);
    if before.is_free() {
        return output::lines([format!("{shown} is free: nothing to release")]);
    }
    output::lines(detail::render(&before))?;
    if !yes && !confirm(&shown).await? {
        return Err(Failure::runtime(format!("{shown} not released")));
    }
    let ended = (manager.force_release(key).await).map_err(|e| target.failure(&e))?;
    if ended {
        output::lines([released(&shown, &before)])
    } else {
        output::lines([format!("{shown} was free by then: nothing released")])
    }
}

/// The line that says which holds a forced release ended.
fn released(shown: &str, before: &LockState) -> String {
    let holds: Vec<String> = (before.holders.iter())
        .map(|h| {
            let token = h.token.map_or(String::new(), |t| format!(", token {t}"));
            let name = describe::printable(&describe::holder_name(h));
            format!("{name} (owner {}{token})", describe::printable(&h.owner))
        })
        .collect();
    format!(
        "released {shown}: ended the holds of {}; they learn it at their next renewal, \
         and the lock goes to its next waiter",
        holds.join(", ")
    )
}

/// Ask on the terminal whether to force the release of `shown`; true on `y` or `yes`.
async fn confirm(shown: &str) -> Result<bool, Failure> {
    use std::io::Write;
    let mut err = std::io::stderr().lock();
    let _ = write!(
        err,
        "\nForce the release of {shown}? Its holders lose it while they may still be working \
         under it. [y/N] "
    );
    let _ = err.flush();
    drop(err);
    let answer = tokio::task::spawn_blocking(|| {
        let mut line = String::new();
        std::io::stdin().read_line(&mut line).map(|_| line)
    })
    .await
    .map_err(|e| Failure::runtime(format!("cannot read the answer: {e}")))?
    .map_err(|e| Failure::runtime(format!("cannot read the answer: {e}")))?;
    Ok(matches!(
        answer.trim().to_ascii_lowercase().as_str(),
        "y" | "yes"
    ))
}

/// A JSON document, indented for a person; `jq` and every parser read it alike.
fn pretty(document: &serde_json::Value) -> String {
    serde_json::to_string_pretty(document).unwrap_or_else(|_| document.to_string())
}
