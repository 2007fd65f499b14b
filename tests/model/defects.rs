//! Seeded defects: each switch puts back one mistake the scripts had or could have had, and a
//! test asserts that the checker finds a counterexample for the property it breaks.

/// Which defects the scripts carry (all off: the scripts as they are).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Defects {
    /// renew.lua sets the lease without GT, shortening another re-entry's longer one.
    pub renew_without_gt: bool,
    /// release.lua drops a hold of the owner whatever its token (an undo by owner).
    pub release_by_owner: bool,
    /// next_token ignores the clock floor: after a restart the counter starts again.
    pub no_clock_floor: bool,
    /// acquire.lua re-enters a hold of the owner its guards do not have (restored by a restart).
    pub reenter_restored: bool,
    /// grant_next binds a grant to no wait ('#f' = '1'), so its withdrawal cannot find it.
    pub grant_unnamed: bool,
    /// fair_acquire.lua marks '#w' on a lock that does not exist (a hash without expiry).
    pub mark_missing: bool,
    /// A cohort hands its hold to the next request without the server's recent word on it.
    pub handoff_unproven: bool,
    /// release.lua frees the lock and tells nobody (a lost wake-up).
    pub release_silent: bool,
    /// shared.lua's `has_room` lets a write in while reads hold (it looks at `#x` alone).
    pub write_beside_reads: bool,
    /// shared.lua's `has_room` grants a permit while all of them are held (`<=` for `<`).
    pub permit_over: bool,
    /// A read joins its read group's hold without the server's recent word on it.
    pub join_unproven: bool,
    /// plain_release.lua does not keep the last token handed out under the hold in the counter.
    pub plain_release_forgets: bool,
    /// A lease is asked of the server as the client counts it, without the drift allowance.
    pub no_drift_allowance: bool,
    /// A renewal that went unanswered extends the client's deadline as if it had renewed.
    pub trust_unanswered: bool,
    /// The watchdog applies a renewal batch's answers to its locks in the wrong order.
    pub batch_swapped: bool,
    /// The inbox routes a grant by its waiter id alone, not by its lock.
    pub route_by_waiter: bool,
    /// A request that tried again after it queued keeps the grant its ticket holds
    /// (`drop_stale_grant`'s rule taken out).
    pub keep_stale_grant: bool,
    /// fair_acquire.lua lets a request that has not queued re-enter a grant made to another
    /// wait of its owner, whose guard it does not have (one token for two guards).
    pub share_grant: bool,
    /// grant_next claims a grant for longer than the claim (as for a lease), so a grant that
    /// no request waits for keeps the lock past its claim.
    pub long_claim: bool,
    /// takeover.lua ends a hold the first time it finds its manager missing, with no grace.
    pub takeover_on_one_miss: bool,
    /// The holder counts PINGs of an inbox that reconnected since its last renewal began.
    pub proofs_before_renewal: bool,
    /// renew.lua leaves the hold's takeover mark in place.
    pub renewal_keeps_mark: bool,
    /// A grant is taken from its message within its claim, though its takeover deadline passed.
    pub grant_past_takeover: bool,
}

impl Defects {
    /// The names of the defects switched on, for the traces printed.
    pub fn switched_on(&self) -> String {
        let all = format!("{self:?}");
        let fields = all.split([',', '{', '}']).map(str::trim);
        let on = fields.filter_map(|f| f.strip_suffix(": true"));
        on.collect::<Vec<_>>().join(", ")
    }
}
