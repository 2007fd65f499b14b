//! Eight jobs on two managers take random pairs of four locks, in random order, for 30 s: no two
//! holders of one lock overlap, each lock's tokens rise, and no set waits out its timeout (which a
//! deadlock would make every job in the cycle do).

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tower_lock::{LockError, LockManager, LockOptions};

use crate::on_both_backends;
use crate::support::fixture::Fixture;
use crate::support::masters::Masters;

const KEYS: [&str; 4] = ["pair:0", "pair:1", "pair:2", "pair:3"];
const JOBS: u64 = 8;
const RUN: Duration = Duration::from_secs(30);
/// Far longer than any set waits while others hold a pair for a millisecond or two.
const WAIT: Duration = Duration::from_secs(20);

/// What the jobs saw, per lock.
#[derive(Default)]
struct Seen {
    inside: [AtomicUsize; 4],
    last_token: [AtomicU64; 4],
    overlaps: AtomicUsize,
    falling_tokens: AtomicUsize,
}

impl Seen {
    /// Enter lock `k` holding `token`, counting an overlap and a token that did not rise.
    fn enter(&self, k: usize, token: u64) {
        if self.inside[k].fetch_add(1, Ordering::SeqCst) != 0 {
            self.overlaps.fetch_add(1, Ordering::SeqCst);
        }
        if self.last_token[k].fetch_max(token, Ordering::SeqCst) >= token {
            self.falling_tokens.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn leave(&self, k: usize) {
        self.inside[k].fetch_sub(1, Ordering::SeqCst);
    }
}

/// A small deterministic generator (xorshift64), seeded per job.
struct Draws(u64);

impl Draws {
    fn next(&mut self, below: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % below
    }

    /// Two different locks, in a random order.
    fn pair(&mut self) -> (usize, usize) {
        let first = self.next(4) as usize;
        let second = (first + 1 + self.next(3) as usize) % 4;
        (first, second)
    }
}

/// One job: take random pairs until `RUN` is over; returns the sets it held.
async fn job(manager: LockManager, seed: u64, seen: Arc<Seen>) -> u64 {
    let mut draws = Draws(0x9E37_79B9_7F4A_7C15 ^ (seed + 1).wrapping_mul(0x2545_F491_4F6C_DD1D));
    let opts = LockOptions::exclusive().wait_timeout(WAIT);
    let started = Instant::now();
    let mut held = 0;
    while started.elapsed() < RUN {
        let (a, b) = draws.pair();
        let owner = manager.owner();
        let keys = [KEYS[a], KEYS[b]];
        let set = if draws.next(4) == 0 {
            owner
                .try_acquire_all(keys, &opts)
                .await
                .expect("try_acquire_all")
        } else {
            match owner.acquire_all(keys, &opts).await {
                Ok(set) => Some(set),
                Err(err @ LockError::Timeout { .. }) => panic!("job {seed}: deadlock? {err}"),
                Err(err) => panic!("job {seed}: {err}"),
            }
        };
        let Some(set) = set else { continue };
        let lost_before = set.is_lost();
        for k in [a, b] {
            seen.enter(k, set.fencing_token(KEYS[k]).expect("token"));
        }
        tokio::time::sleep(Duration::from_millis(1 + draws.next(2))).await;
        for k in [a, b] {
            seen.leave(k);
        }
        assert!(
            !lost_before && !set.is_lost(),
            "job {seed}: a lease was lost"
        );
        set.release().await.expect("release");
        held += 1;
    }
    held
}

/// Run the jobs on `managers` (alternately) and check what they saw.
async fn random_pairs(managers: Vec<LockManager>) {
    let seen = Arc::new(Seen::default());
    let jobs: Vec<_> = (0..JOBS)
        .map(|seed| {
            let manager = managers[seed as usize % managers.len()].clone();
            tokio::spawn(job(manager, seed, seen.clone()))
        })
        .collect();
    let mut counts = Vec::new();
    for job in jobs {
        counts.push(job.await.expect("job"));
    }
    assert_eq!(
        seen.overlaps.load(Ordering::SeqCst),
        0,
        "two holders of one lock"
    );
    assert_eq!(
        seen.falling_tokens.load(Ordering::SeqCst),
        0,
        "a token did not rise"
    );
    assert!(
        counts.iter().all(|&n| n >= 10),
        "a job barely ran: {counts:?}"
    );
    eprintln!("sets held per job in {RUN:?}: {counts:?}");
    for manager in &managers {
        assert_eq!(manager.waiting(), 0);
    }
}

async fn eight_jobs_take_random_pairs_without_deadlock(fixture: Fixture) {
    let managers = vec![fixture.manager().await, fixture.manager().await];
    random_pairs(managers).await;
}

on_both_backends!(eight_jobs_take_random_pairs_without_deadlock);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eight_jobs_take_random_pairs_without_deadlock_on_a_quorum() {
    let masters = Masters::start(3);
    let managers = vec![
        masters.manager(Duration::from_secs(30)).await,
        masters.manager(Duration::from_secs(30)).await,
    ];
    random_pairs(managers).await;
}
