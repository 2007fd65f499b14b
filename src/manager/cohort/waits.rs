//! The requests waiting in the cohorts, for the oldest-wait gauge.

use super::Cohorts;
use crate::waiters::WaitStart;

impl Cohorts {
    /// What each request waiting in a cohort for its turn waits for, and since when.
    pub(crate) fn for_each_wait(&self, mut each: impl FnMut(WaitStart)) {
        let table = self.table();
        let waiting = table.cohorts.values().flat_map(|c| c.waiting.iter());
        waiting
            .filter(|w| !w.turn.is_closed())
            .for_each(|w| each(w.wait));
    }
}
