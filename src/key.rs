//! Lock names and the key extractors that derive them from requests.
//!
//! A [`KeyExtractor`] looks at a [`RequestView`] (method, path, headers, extensions) and names the
//! locks the request needs. Built-ins: [`pattern`], [`path`], [`header`] and [`from_fn`]. A
//! built-in extractor rejects a request it does not match (400 Bad Request, gRPC
//! `INVALID_ARGUMENT`, with the reason in the body) unless it is made `.optional()`; a [`from_fn`]
//! returning no name is the one explicit "no lock". Every extractor can be narrowed to some
//! methods ([`KeyExtractor::skip_methods`], [`KeyExtractor::only_methods`]), combined with another
//! ([`KeyExtractor::and`]) or prefixed ([`KeyExtractor::prefix`]).

pub(crate) mod canonical;
mod extract;
mod keys;
mod pattern;
mod view;

pub use extract::{Both, FromFn, Header, KeyExtractor, Methods, Path, Prefixed};
pub use keys::{IntoKeys, Keys};
pub use pattern::Pattern;
pub use view::RequestView;

use crate::error::KeyError;

/// Lock the resource a path is about: `pattern("/accounts/{id}")` locks `accounts/42` for
/// `/accounts/42` and for every path below it (`/accounts/42/orders/7`); a path it does not match
/// is rejected with 400 Bad Request (gRPC `INVALID_ARGUMENT`) naming the path and the pattern,
/// unless the pattern is [`Pattern::optional`].
///
/// A `{name}` segment matches any one non-empty segment; other segments must match exactly
/// (case-sensitive). The name is the matched segments joined by `/`, each in one canonical spelling
/// (percent escapes decoded, then everything but unreserved characters re-escaped), so that
/// `/accounts/4%32` and `/accounts/42` lock the same account. An empty segment (`//`) matches
/// nothing: `/accounts//deposit/1` is not `accounts/deposit`, since no router would route it as
/// account `deposit` either. [`Pattern::name_with`] gives the name for a resource, for jobs that
/// lock it outside a request.
///
/// # Panics
///
/// When the pattern cannot be what its author meant: empty, unbalanced braces (`/accounts/{id`),
/// axum 0.7's syntax (`/accounts/:id`), a parameter named twice, a parameter inside a segment or a
/// wildcard. The message names the pattern and the fix. Like a router's bad route, this is a
/// mistake in the program, found at start-up; use [`try_pattern`] for a pattern from configuration.
///
/// ```
/// use tower_lock::key::{self, KeyExtractor};
///
/// let accounts = key::pattern("/accounts/{id}");
/// let req = http::Request::put("/accounts/42/orders").body(()).unwrap();
/// let keys = accounts.extract(&req).unwrap();
/// assert_eq!(keys.iter().next().map(|k| k.as_str()), Some("accounts/42"));
///
/// let other = http::Request::get("/health").body(()).unwrap();
/// assert!(accounts.extract(&other).is_err()); // 400: the layer does not run it unlocked
/// assert!(accounts.optional().extract(&other).unwrap().is_empty()); // opted in: unlocked
/// ```
#[track_caller]
pub fn pattern(pattern: &str) -> Pattern {
    match Pattern::parse(pattern) {
        Ok(pattern) => pattern,
        Err(err) => panic!("{err}"),
    }
}

/// [`pattern`] for a pattern that may be wrong, such as one read from configuration: the same
/// extractor, or [`KeyError::Pattern`] naming what is wrong with it.
///
/// ```
/// use tower_lock::key;
///
/// assert!(key::try_pattern("/accounts/{id}").is_ok());
/// let err = key::try_pattern("/accounts/:id").unwrap_err();
/// assert!(err.to_string().contains("write {id}"), "{err}");
/// ```
pub fn try_pattern(pattern: &str) -> Result<Pattern, KeyError> {
    Pattern::parse(pattern)
}

/// Lock the whole request path, in canonical spelling (see [`pattern`]) with its leading `/`, without
/// the query string: `/accounts/42/orders` locks `/accounts/42/orders`; `/` locks `/`.
///
/// Empty segments are dropped (`/a//b` locks `/a/b`): the name covers the whole path, so this can
/// only make two spellings share one lock, never let a request escape the lock of its resource.
pub fn path() -> Path {
    Path
}

/// Lock the value of the header `name` (trimmed). A request without the header is rejected with 400
/// (unless the extractor is [`Header::optional`]: it then passes without a lock, counted and
/// logged); an empty or non-UTF-8 value is rejected with 400. Consider [`KeyExtractor::prefix`] to keep header names apart from
/// other names.
///
/// ```
/// use tower_lock::key::{self, KeyExtractor};
///
/// let tenant = key::header("x-tenant").prefix("tenant:");
/// let req = http::Request::post("/jobs").header("x-tenant", "acme").body(()).unwrap();
/// let keys = tenant.extract(&req).unwrap();
/// assert_eq!(keys.iter().next().map(|k| k.as_str()), Some("tenant:acme"));
/// ```
pub fn header(name: impl Into<String>) -> Header {
    Header {
        name: name.into(),
        optional: false,
    }
}

/// Any closure of the request as an extractor. It may return `Option<String>` (`None` lets the
/// request through), a `String`, a `Vec` of names (a composite key), or a `Result` of those with a
/// [`KeyError`] (400 Bad Request): see [`IntoKeys`].
///
/// ```
/// use tower_lock::key::{self, KeyExtractor, RequestView};
///
/// // lock the source and the target account of a transfer
/// let transfer = key::from_fn(|req: &dyn RequestView| {
///     let from = req.header_str("x-from")?;
///     let to = req.header_str("x-to")?;
///     Some(vec![format!("account:{from}"), format!("account:{to}")])
/// });
/// let req = http::Request::post("/transfers")
///     .header("x-from", "2")
///     .header("x-to", "1")
///     .body(())
///     .unwrap();
/// let names: Vec<String> = transfer.extract(&req).unwrap().into_sorted().iter().map(|k| k.to_string()).collect();
/// assert_eq!(names, ["account:1", "account:2"]);
/// ```
pub fn from_fn<F, R>(f: F) -> FromFn<F>
where
    F: Fn(&dyn RequestView) -> R + Send + Sync + 'static,
    R: IntoKeys,
{
    FromFn(f)
}

/// The longest lock name accepted, in bytes. Longer names are rejected with [`KeyError::TooLong`];
/// names that are merely long are stored under a hash by the Redis backend.
pub const MAX_KEY_LEN: usize = 4096;

/// `keys` in the order every set of locks is taken in: sorted by name (byte order), each name once.
/// Sets taken in one order cannot deadlock each other.
pub(crate) fn in_lock_order(mut keys: Vec<LockKey>) -> Vec<LockKey> {
    keys.sort_unstable();
    keys.dedup();
    keys
}

/// A validated lock name: non-empty and at most [`MAX_KEY_LEN`] bytes. Any other content is allowed;
/// backends escape it so that a name can never reach outside its own lock.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LockKey(String);

impl LockKey {
    /// Validate `name`.
    pub fn new(name: impl Into<String>) -> Result<Self, KeyError> {
        let name = name.into();
        if name.is_empty() {
            return Err(KeyError::Empty);
        }
        if name.len() > MAX_KEY_LEN {
            return Err(KeyError::TooLong {
                len: name.len(),
                max: MAX_KEY_LEN,
            });
        }
        Ok(LockKey(name))
    }

    /// The name as given.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for LockKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_empty_and_overlong_names() {
        assert_eq!(LockKey::new(""), Err(KeyError::Empty));
        let long = "x".repeat(MAX_KEY_LEN + 1);
        assert!(matches!(LockKey::new(long), Err(KeyError::TooLong { .. })));
        assert_eq!(
            LockKey::new("account:42").map(|k| k.to_string()),
            Ok("account:42".to_owned())
        );
    }
}
