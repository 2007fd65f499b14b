//! The safety contract (DESIGN.md) as properties of the model.

use crate::liveness::{taken, TAKEN};
use crate::model::{Config, LockModel};
use crate::state::{Client, Phase, State};
use stateright::Property;

/// Contract 1: two holders never overlap unless the earlier one's `lost()` fired (its deadline
/// passed) or a restart with loss took its hold (or one of its re-entries) from the server.
pub const EXCLUSION: &str = "exclusion";
/// Contract 2: a release acts only on the hold it belongs to.
pub const OWN_HOLD: &str = "no operation touches a hold it did not make";
/// Contract 3: every fresh acquisition's token is above every earlier one.
pub const TOKENS: &str = "tokens strictly increase";
/// Contract 5: every key has an expiry.
pub const EXPIRY: &str = "no key without an expiry";
/// Contract 4, as a safety property: no live process's hold is one nothing will use or end
/// before its lease runs out (a grant whose wait left it behind).
pub const NO_STRANDED: &str = "no grant left behind by its wait";

fn exclusion(_: &LockModel, s: &State) -> bool {
    let holding = s
        .procs
        .iter()
        .filter(|p| !p.guards.is_empty() && s.client_now() < p.deadline && !p.forgotten)
        .count();
    holding <= 1
}

fn no_stranded(_: &LockModel, s: &State) -> bool {
    let plain = s.server.plain.as_ref().filter(|p| !p.restored);
    let mut owners: Vec<Client> = plain.map(|p| p.owner).into_iter().collect();
    if let Some(lock) = s.server.lock.as_ref().filter(|l| !l.restored) {
        owners.extend(lock.holds.keys());
    }
    owners.into_iter().all(|o| {
        s.procs.get(usize::from(o)).is_none_or(|p| {
            !p.alive
                || !p.guards.is_empty()
                || p.phase != Phase::Idle
                || !p.inbox.is_empty()
                || !p.late_releases.is_empty()
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
