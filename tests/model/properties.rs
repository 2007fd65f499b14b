//! The safety contract (DESIGN.md) as properties of the model.

use crate::liveness::{taken, TAKEN};
use crate::model::{Config, LockModel};
use crate::state::{Client, FairMark, LockHash, Msg, Phase, Proc, State, Waiter};
use stateright::Property;

/// Contract 1: two holders never overlap unless the earlier one's `lost()` fired (its deadline,
/// or with takeover its inbox's, passed) or a restart with loss took its hold (or one of its
/// re-entries) from the server.
pub const EXCLUSION: &str = "exclusion";
/// Contract 2: a release acts only on the hold it belongs to.
pub const OWN_HOLD: &str = "no operation touches a hold it did not make";
/// Contract 3: every fresh acquisition's token is above every earlier one.
pub const TOKENS: &str = "tokens strictly increase";
/// Contract 5: every key has an expiry.
pub const EXPIRY: &str = "no key without an expiry";
/// Contract 4, as a safety property: no live process's hold is one nothing will use or end
/// before its lease runs out (a grant whose wait left it behind). A grant's claim is such a
/// lease: a grant to a wait that no live request waits as may stand until its claim runs out,
/// no longer.
pub const NO_STRANDED: &str = "no grant left behind by its wait";

fn exclusion(m: &LockModel, s: &State) -> bool {
    let holding = s
        .procs
        .iter()
        .filter(|p| !p.guards.is_empty() && s.client_now() < m.lost_at(p) && !p.forgotten)
        .count();
    holding <= 1
}

/// Whether something of process `p` will use or end its hold: a guard, a request under way, a
/// message to read or a release still to land.
fn in_use(p: &Proc) -> bool {
    !p.guards.is_empty()
        || p.phase != Phase::Idle
        || !p.inbox.is_empty()
        || !p.late_releases.is_empty()
}

/// Whether process `p` will take up or pass on the grant to its wait `w`: the request waits as
/// `w`, or the grant's message is still in its inbox (or the grant's hold is in use already).
fn grant_in_use(p: &Proc, w: Waiter) -> bool {
    let waits = matches!(p.phase, Phase::Fair { waiter, .. } if waiter == w);
    let told = p
        .inbox
        .iter()
        .any(|m| matches!(m, Msg::Grant(g, _) if *g == w));
    waits || told || !p.guards.is_empty() || !p.late_releases.is_empty()
}

/// Whether the grant `l` names ends with its claim: made by grant_next at most the claim (the
/// eviction the server is asked to keep) before the lock's expiry.
fn within_claim(m: &LockModel, l: &LockHash) -> bool {
    let claim_end = l.granted.map(|t| t + m.server_eviction());
    claim_end.is_some_and(|end| l.expires.is_some_and(|e| e <= end))
}

/// A hold of a live process that nothing will use or end is a waiter left behind, with one
/// exception. A restart back to a snapshot brings back a wait its live manager has left, with
/// its heartbeat (whose deadline carries the drift allowance, so it outlives the restart's
/// tick): the wait may be granted, and its message reach nobody who waits for it (a message
/// dropped). Nothing in the process knows that wait, so the grant stands until its claim runs
/// out, as a dead waiter's would, and the lock is then free (contract 4 counts from there).
fn no_stranded(m: &LockModel, s: &State) -> bool {
    let live = |o: Client| s.procs.get(usize::from(o)).filter(|p| p.alive);
    let plain = s.server.plain.as_ref().filter(|p| !p.restored);
    if plain.is_some_and(|l| live(l.owner).is_some_and(|p| !in_use(p))) {
        return false;
    }
    let Some(lock) = s.server.lock.as_ref().filter(|l| !l.restored) else {
        return true;
    };
    lock.holds.keys().all(|&o| {
        live(o).is_none_or(|p| match lock.fair {
            Some(FairMark::Wait(w)) if w.0 == o => grant_in_use(p, w) || within_claim(m, lock),
            _ => in_use(p),
        })
    })
}

/// Every property the model checks under the bounds `cfg`.
pub fn properties(cfg: &Config) -> Vec<Property<LockModel>> {
    let mut all = vec![
        Property::always(EXCLUSION, exclusion),
        Property::always(OWN_HOLD, |_, s: &State| !s.ghost.touched_foreign),
        Property::always(TOKENS, |_, s: &State| !s.ghost.token_regressed),
        Property::always(EXPIRY, |_, s: &State| !s.server.key_without_expiry()),
        Property::always(NO_STRANDED, no_stranded),
    ];
    if cfg.liveness {
        all.push(Property::eventually(TAKEN, taken));
    }
    all
}
