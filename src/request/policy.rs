//! The policy of one layer or middleware: its [`RequestOptions`] and the custom response, if any,
//! with which it answers the requests it rejects.

use std::sync::Arc;

use super::options::RequestOptions;
use super::reject::Rejection;
use super::unlocked::UnlockedLog;

/// A custom rejection response; `R` is the web stack's response type.
pub(crate) type RejectFn<R> = Arc<dyn Fn(&Rejection) -> R + Send + Sync>;

/// What one layer or middleware shares with every service and request future it makes: how it
/// treats requests, and how it answers those it rejects (`R`: the web stack's response type).
pub(crate) struct Policy<R> {
    pub(crate) options: RequestOptions,
    reject: Option<RejectFn<R>>,
    /// Requests let through unlocked by an optional extractor; shared by every copy.
    pub(crate) unlocked: UnlockedLog,
}

impl<R> Policy<R> {
    /// Change the options with `change`.
    pub(crate) fn set_options(&mut self, change: impl FnOnce(RequestOptions) -> RequestOptions) {
        self.options = change(std::mem::take(&mut self.options));
    }

    /// Answer rejected requests with `reject`'s response instead of the stack's default one.
    pub(crate) fn reject_with(&mut self, reject: RejectFn<R>) {
        self.reject = Some(reject);
    }

    /// The response for `rejection`, counted in the metrics: the custom one if set, else
    /// `default`'s.
    pub(crate) fn respond(
        &self,
        rejection: Rejection,
        grpc: bool,
        default: impl FnOnce(&Rejection) -> R,
    ) -> R {
        let rejection = self.options.settle(rejection, grpc);
        match &self.reject {
            Some(reject) => reject(&rejection),
            None => default(&rejection),
        }
    }
}

impl<R> Default for Policy<R> {
    fn default() -> Self {
        Policy {
            options: RequestOptions::default(),
            reject: None,
            unlocked: UnlockedLog::default(),
        }
    }
}

impl<R> Clone for Policy<R> {
    fn clone(&self) -> Self {
        Policy {
            options: self.options.clone(),
            reject: self.reject.clone(),
            unlocked: self.unlocked.clone(),
        }
    }
}

impl<R> std::fmt::Debug for Policy<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Policy")
            .field("options", &self.options)
            .field("custom_reject", &self.reject.is_some())
            .finish()
    }
}
