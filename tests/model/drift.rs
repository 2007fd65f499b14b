//! Clock drift and unanswered renewals (contract 1: the lost signal fires no later than the
//! moment the server may free the lock). The server's clock may gain on the clients' up to the
//! drift bound (`Drift`); every lease is asked of the server with the drift allowance more
//! (`args.rs`, `server_ms`), while the client counts the lease from the start of the call that
//! answered. A renewal may go unanswered, whether it reached the server or not: the client
//! keeps its deadline and loses the hold there (`watchdog/leases.rs`, `judge`).
//!
//! Implementation notes: one tick of drift stands for the documented bound (1 % of the lease
//! and 2 ms): what matters is that the allowance covers the most the server's clock may gain.
//! The server's clock never runs slower than the clients' here: that frees nothing early, and a
//! tick is too coarse to slow it by 1 % (a clock that stood still for a whole lease would break
//! what the plain path rests on, that the server's clock passed a lost hold's token block). All
//! clients share one clock: a holder's exclusion rests on its clock against the server's, never
//! on another client's.

use crate::model::{Config, LockModel};
use crate::properties::EXCLUSION;
use crate::teeth::found_in;

/// The main check's bounds with a tick of drift and unanswered renewals, one more tick of
/// clock, and neither restarts nor dead fair waiters (the main check has them).
pub fn drift_bounds() -> Config {
    let mut cfg = crate::small();
    cfg.drift = 1;
    cfg.unanswered = true;
    cfg.max_time = 3;
    cfg.restarts = 0;
    cfg.dead_queue = false;
    cfg
}

#[test]
fn drift_and_unanswered_renewals_keep_every_property() {
    crate::check_exhaustively(
        "drift and unanswered renewals",
        LockModel {
            cfg: drift_bounds(),
        },
        crate::depth(),
    );
}

#[test]
fn a_lease_without_the_drift_allowance_is_found() {
    let mut cfg = drift_bounds();
    cfg.defects.no_drift_allowance = true;
    found_in(cfg, EXCLUSION);
}

#[test]
fn trusting_an_unanswered_renewal_is_found() {
    let mut cfg = drift_bounds();
    cfg.defects.trust_unanswered = true;
    found_in(cfg, EXCLUSION);
}
