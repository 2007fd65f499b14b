//! The safety contract (DESIGN.md), one scenario per module, each against real redis-server
//! processes (and the memory backend where it applies): the ways a lock was seen, or could be
//! shown, to break its promises under re-entry, restarts, retries and late messages.

#[path = "../support/mod.rs"]
mod support;

mod beat_round;
mod cancelled_take;
mod cohort_lost;
mod cohort_restart;
mod cohorts;
mod dead_waiters;
mod drift;
mod expired_grant;
mod failed_wake;
mod fifo_cohorts;
mod late_grant;
mod lease_table;
mod mixed_modes;
mod one_exclusion;
mod outage;
mod outage_log;
mod owner_grant;
mod partial_loss;
mod plain_retire;
mod quorum_holds;
mod read_flood;
mod read_group_reentry;
mod read_groups;
mod reentry_leases;
mod restart;
mod stale_reentry;
mod tokens;
mod waiting_record;
mod watch;
