//! The wait registry under many schedules: requests of this process wait for one lock in
//! exclusive mode, as `acquire.rs` and `ticket.rs` make them (register, attempt, sleep until
//! woken, leave), against a model lock whose release wakes one local waiter, as the memory
//! backend's does and a Redis release's message does.
//!
//! What it covers: `register`, `wake_one`, `woken`, `keep_wake`, `leave` and `wake_all`, on
//! shuttle's lock and atomics, including the steps between a wake-up's flag and its `Notify`,
//! and a request that gives up (its wait's timer fires at a step of the scheduler's choosing)
//! after a wake-up reached it. Asserted: every request that does not give up gets the lock — a
//! wake-up lost on the way leaves one asleep with the lock free, a deadlock shuttle reports —
//! and nobody is registered at the end. What it leaves out: fair grants (`grant`), a second
//! request of one owner (`departed`), the retry timer of a busy lock (each request waits for a
//! wake-up alone here, which is what a lost one would break), and other processes' waiters.

use std::pin::pin;
use std::sync::Arc;

use futures_util::future::{select, Either};
use shuttle::future::{block_on, spawn, yield_now};

use super::{LockId, WaitRegistry};
use crate::ids::OwnerId;
use crate::schedules::{explore, finds};
use crate::sync::{Defect, Mutex};

/// Requests that wait until they get the lock; one more gives up when its timer fires.
const STAYING: usize = 3;

/// A model lock and the registry of the process waiting for it.
#[derive(Default)]
struct World {
    waiters: WaitRegistry,
    holder: Mutex<Option<usize>>,
}

impl World {
    fn id() -> LockId {
        LockId::new("k")
    }

    /// Take the lock if free (one attempt).
    fn attempt(&self, who: usize) -> bool {
        let mut holder = self.holder.lock().unwrap();
        if holder.is_some() {
            return false;
        }
        *holder = Some(who);
        true
    }

    /// Release the lock: free, and one local waiter woken.
    fn release(&self, who: usize) {
        let mut holder = self.holder.lock().unwrap();
        assert_eq!(*holder, Some(who), "released by its holder");
        *holder = None;
        drop(holder);
        self.waiters.wake_one(&Self::id());
    }

    /// Request `who` waits for the lock (with a timer that ends its wait if `patience` is some)
    /// and holds it for a step: whether it got it.
    async fn request(&self, who: usize, patience: Option<usize>) -> bool {
        let id = Self::id();
        let owner = OwnerId::new(format!("o{who}"));
        let waiter = self
            .waiters
            .register(&id, &owner, None, start())
            .expect("one request per owner");
        let mut busy = 0;
        let acquired = loop {
            if self.attempt(who) {
                break true;
            }
            busy += 1;
            let timer = async {
                let Some(steps) = patience else {
                    return std::future::pending().await;
                };
                for _ in 0..steps {
                    yield_now().await;
                }
            };
            if let Either::Right(_) = select(pin!(waiter.woken()), pin!(timer)).await {
                // the wait timed out: a wake-up that led to its last attempt is passed on
                if busy > 0 {
                    waiter.keep_wake();
                }
                break false;
            }
        };
        let departure = self.waiters.leave(&id, &waiter, acquired);
        if !acquired && departure.last {
            // the ticket's drop: a request that began to wait meanwhile checks again
            self.waiters.wake_one(&id);
        }
        if acquired {
            yield_now().await;
            self.release(who);
        }
        acquired
    }
}

fn scenario() {
    block_on(async {
        let world = Arc::new(World::default());
        let mut staying: Vec<_> = (0..STAYING)
            .map(|who| {
                let world = world.clone();
                spawn(async move { world.request(who, None).await })
            })
            .collect();
        let impatient = world.clone();
        let giving_up = spawn(async move { impatient.request(STAYING, Some(4)).await });
        let reconnecting = world.clone();
        let wake_all = spawn(async move {
            yield_now().await;
            reconnecting.waiters.wake_all();
        });
        for request in staying.drain(..) {
            assert!(
                request.await.expect("served"),
                "a request that waits gets the lock"
            );
        }
        giving_up.await.expect("the impatient request ends");
        wake_all.await.expect("the reconnection ends");
        assert_eq!(world.waiters.len(), 0, "a waiter was left registered");
        assert!(
            world.holder.lock().unwrap().is_none(),
            "the lock is free at the end"
        );
    });
}

#[test]
fn every_waiter_is_woken_under_every_schedule_explored() {
    explore(scenario);
}

#[test]
fn a_wake_up_kept_by_a_leaving_waiter_is_found() {
    let failure = finds(Defect::WakeKept, scenario);
    assert!(failure.contains("deadlock"), "{failure}");
}

/// A wait begun now (what the oldest-wait gauge reads).
fn start() -> super::WaitStart {
    super::WaitStart {
        mode: crate::options::Mode::Exclusive,
        since: std::time::Instant::now(),
    }
}
