//! Several locks taken together by one owner: every one or none, in one order, within one wait.
//!
//! Two jobs that take the same two locks in opposite orders deadlock: each holds one and waits for
//! the other. Here the locks are taken in the order of their names (see [`in_lock_order`]),
//! whatever order the caller gave, so no two callers of [`LockOwner::acquire_all`] (nor two
//! requests through a lock layer's composite keys, which use [`take_in_order`] too) wait for each
//! other in a cycle.

use std::future::Future;
use std::time::{Duration, Instant};

use super::{LockGuard, LockOwner};
use crate::error::{KeyError, LockError};
use crate::key::{in_lock_order, LockKey};
use crate::options::LockOptions;

mod guards;

pub use guards::LockGuards;

/// How long the locks of one set may wait, all of them together.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wait {
    /// Until this much time has passed since the first lock was asked for.
    For(Duration),
    /// Until every lock is taken.
    Forever,
    /// Never: one attempt per lock (try mode).
    Never,
}

impl Wait {
    /// The wait `opts` ask for.
    fn of(opts: &LockOptions) -> Self {
        match opts.wait_timeout_value() {
            Some(timeout) => Wait::For(timeout),
            None => Wait::Forever,
        }
    }
}

/// Take the lock of each of `keys`, in the order given (callers pass [`in_lock_order`]), through
/// `take_one`, which is told the wait left for that lock out of `wait`.
///
/// On the first failure, the locks already taken are released before the failure is returned:
/// every lock or none. If the caller stops waiting, the locks taken so far are released in the
/// background, as dropped guards are.
pub(crate) async fn take_in_order<E, F, Fut>(
    keys: &[LockKey],
    wait: Wait,
    mut take_one: F,
) -> Result<Vec<LockGuard>, E>
where
    F: FnMut(LockKey, Wait) -> Fut,
    Fut: Future<Output = Result<LockGuard, E>>,
{
    // a timeout past the clock's end waits forever, as it does for one lock
    let deadline = match wait {
        Wait::For(timeout) => crate::saturating::deadline(Instant::now(), timeout),
        Wait::Forever | Wait::Never => None,
    };
    let mut taken = Vec::with_capacity(keys.len());
    for key in keys {
        let left = match (wait, deadline) {
            (Wait::Never, _) => Wait::Never,
            (_, Some(deadline)) => Wait::For(deadline.saturating_duration_since(Instant::now())),
            (_, None) => Wait::Forever,
        };
        match take_one(key.clone(), left).await {
            Ok(guard) => taken.push(guard),
            Err(err) => {
                release_taken(taken).await;
                return Err(err);
            }
        }
    }
    Ok(taken)
}

/// Release the locks of a set that could not be completed, all at once. A failure changes nothing
/// for the caller: that lock frees itself when its lease ends.
async fn release_taken(taken: Vec<LockGuard>) {
    let releases = taken.into_iter().map(|guard| async move {
        let key = guard.key().to_owned();
        if let Err(err) = guard.release().await {
            tracing::debug!(key, error = %err, "releasing a lock of an incomplete set failed");
        }
    });
    futures_util::future::join_all(releases).await;
}

/// Why one lock of a set was not taken.
enum Refused {
    /// Someone else holds it (try mode).
    Busy,
    /// The error of its acquisition.
    Failed(LockError),
}

impl From<LockError> for Refused {
    fn from(err: LockError) -> Self {
        Refused::Failed(err)
    }
}

impl LockOwner {
    /// Wait for every lock in `keys` and hold them all, or hold none.
    ///
    /// The locks are taken one after another in the order of their names, whatever order `keys`
    /// gives, so two jobs that need the same locks cannot deadlock. `opts`' wait timeout counts
    /// once, for all of them. If one lock cannot be had (timeout, error), the ones already taken
    /// are released before the error is returned. Each lock keeps its own fencing token; a name
    /// given twice is taken once. An empty `keys` is refused: a set that locks nothing is more
    /// likely a mistake than a wish.
    ///
    /// Only locks taken through this call (or in the same order) are covered: a lock the owner
    /// already holds from elsewhere can still be part of a cycle. A fixed lease (and a
    /// `max_hold`) counts from each lock's own acquisition, so a long wait for a later lock eats
    /// into the earlier locks' leases: check [`LockGuards::is_lost`] before relying on the set.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), tower_lock::LockError> {
    /// use tower_lock::{LockManager, LockOptions};
    ///
    /// let manager = LockManager::memory();
    /// let owner = manager.owner();
    /// let both = owner
    ///     .acquire_all(["account:2", "account:1"], &LockOptions::exclusive())
    ///     .await?;
    /// assert_eq!(both.keys().collect::<Vec<_>>(), ["account:1", "account:2"]);
    /// both.release().await?;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn acquire_all<I>(&self, keys: I, opts: &LockOptions) -> Result<LockGuards, LockError>
    where
        I: IntoIterator,
        I::Item: AsRef<str>,
    {
        let keys = self.lock_set(keys, opts)?;
        let started = Instant::now();
        let take = |key, left| self.wait_for_one(key, opts, left);
        match take_in_order(&keys, Wait::of(opts), take).await {
            Ok(guards) => Ok(LockGuards::new(guards)),
            // the whole set waited, not only the lock that timed out
            Err(LockError::Timeout { key, .. }) => Err(LockError::Timeout {
                key,
                waited: started.elapsed(),
            }),
            Err(err) => Err(err),
        }
    }

    /// Take every lock in `keys` if each is free (or held by this owner) now, without waiting;
    /// `Ok(None)` when one is held by someone else, and then none is kept.
    ///
    /// The locks are tried in the order of their names, like [`LockOwner::acquire_all`]. An
    /// unreachable backend is an error, never `None`.
    pub async fn try_acquire_all<I>(
        &self,
        keys: I,
        opts: &LockOptions,
    ) -> Result<Option<LockGuards>, LockError>
    where
        I: IntoIterator,
        I::Item: AsRef<str>,
    {
        let keys = self.lock_set(keys, opts)?;
        let take = |key, _| self.try_one(key, opts);
        match take_in_order(&keys, Wait::Never, take).await {
            Ok(guards) => Ok(Some(LockGuards::new(guards))),
            Err(Refused::Busy) => Ok(None),
            Err(Refused::Failed(err)) => Err(err),
        }
    }

    /// The names of `keys` in lock order, once each, after checking every one (and `opts`) before
    /// any lock is taken.
    fn lock_set<I>(&self, keys: I, opts: &LockOptions) -> Result<Vec<LockKey>, LockError>
    where
        I: IntoIterator,
        I::Item: AsRef<str>,
    {
        let keys = keys
            .into_iter()
            .map(|key| LockKey::new(key.as_ref()))
            .collect::<Result<Vec<_>, _>>()?;
        let keys = in_lock_order(keys);
        let Some(first) = keys.first() else {
            return Err(KeyError::NoKeys.into());
        };
        self.manager().supports(first.as_str(), opts)?;
        Ok(keys)
    }

    /// Take one lock of a set, waiting as long as `wait` allows (`Never`: one attempt, and a
    /// timeout if it is busy).
    async fn wait_for_one(
        &self,
        key: LockKey,
        opts: &LockOptions,
        wait: Wait,
    ) -> Result<LockGuard, LockError> {
        let opts = match wait {
            Wait::For(left) => opts.wait_timeout(left),
            Wait::Forever => opts.wait_forever(),
            Wait::Never => opts.wait_timeout(Duration::ZERO),
        };
        self.acquire(key.as_str(), &opts).await
    }

    /// Take one lock of a set if it is free now.
    async fn try_one(&self, key: LockKey, opts: &LockOptions) -> Result<LockGuard, Refused> {
        let guard = self.try_acquire(key.as_str(), opts).await?;
        guard.ok_or(Refused::Busy)
    }
}
