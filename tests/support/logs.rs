//! What the crate logs, as a test sees it: a `tracing` subscriber that keeps every WARN event as
//! its `field=value` pairs, and the visitor that writes them.

use std::fmt::Write;
use std::sync::{Arc, Mutex};

/// Writes each field of an event or a span as `name=value `.
pub struct Fields<'a>(pub &'a mut String);

impl tracing::field::Visit for Fields<'_> {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        let _ = write!(self.0, "{}={:?} ", field.name(), value);
    }

    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        let _ = write!(self.0, "{}={} ", field.name(), value);
    }
}

/// Keeps every WARN event (and nothing else, unless told to keep ERROR events too) as one line
/// of its fields.
pub struct Warnings(Arc<Mutex<Vec<String>>>, tracing::Level);

impl Warnings {
    /// The subscriber, and the lines it will have kept.
    pub fn new() -> (Warnings, Arc<Mutex<Vec<String>>>) {
        let lines = Arc::new(Mutex::new(Vec::new()));
        (Warnings(lines.clone(), tracing::Level::WARN), lines)
    }

    /// As [`new`](Self::new), keeping ERROR events too.
    pub fn and_errors() -> (Warnings, Arc<Mutex<Vec<String>>>) {
        let lines = Arc::new(Mutex::new(Vec::new()));
        (Warnings(lines.clone(), tracing::Level::ERROR), lines)
    }
}

impl tracing::Subscriber for Warnings {
    fn enabled(&self, metadata: &tracing::Metadata<'_>) -> bool {
        *metadata.level() <= tracing::Level::WARN
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        let level = *event.metadata().level();
        if level == tracing::Level::WARN || level == self.1 {
            let mut fields = String::new();
            event.record(&mut Fields(&mut fields));
            self.0
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(fields);
        }
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

/// `subscriber` as this thread's default until the returned guard drops, seeing every event of
/// this thread, even from a call site another thread reached first.
///
/// While only one dispatcher exists, tracing decides whether a call site is enabled, the first
/// time any thread reaches it, by asking that thread's default alone, and keeps the answer for
/// every thread. A test binary runs its tests on several threads: a site first reached by a test
/// with no subscriber would stay disabled for this one. A second, silent dispatcher, kept with the
/// guard, makes tracing ask every dispatcher instead.
pub fn set_thread_default(
    subscriber: impl tracing::Subscriber + Send + Sync + 'static,
) -> ThreadDefault {
    let second = tracing::Dispatch::new(tracing::subscriber::NoSubscriber::default());
    let default = tracing::subscriber::set_default(subscriber);
    ThreadDefault {
        _default: default,
        _second: second,
    }
}

/// Keeps a subscriber set by [`set_thread_default`] until dropped.
pub struct ThreadDefault {
    _default: tracing::subscriber::DefaultGuard,
    _second: tracing::Dispatch,
}
