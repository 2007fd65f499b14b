//! `KeyExtractor`: how a request names the locks it needs, and the combinators every extractor has.

use std::sync::Arc;

use super::keys::{IntoKeys, Keys};
use super::view::RequestView;
use super::LockKey;
use crate::error::KeyError;

/// Derives the lock names of a request from a [`RequestView`]. Runs synchronously in the service's
/// `call`, once per request, so it should be cheap: look at the method, path and headers, never at
/// the body.
///
/// `Ok` with no names lets the request through without a lock; `Err` rejects it (400 Bad Request,
/// or gRPC `INVALID_ARGUMENT`).
///
/// ```
/// use tower_lock::key::{self, KeyExtractor, RequestView};
///
/// // lock an account for every write, and the tenant named by a header as well
/// let extractor = key::pattern("/accounts/{id}")
///     .and(key::header("x-tenant").prefix("tenant:"))
///     .skip_methods(["GET", "HEAD"]);
///
/// let put = http::Request::put("/accounts/42/orders").header("x-tenant", "acme").body(()).unwrap();
/// let names: Vec<String> = extractor.extract(&put).unwrap().iter().map(|k| k.to_string()).collect();
/// assert_eq!(names, ["accounts/42", "tenant:acme"]);
///
/// let get = http::Request::get("/accounts/42").body(()).unwrap();
/// assert!(extractor.extract(&get).unwrap().is_empty());
/// ```
pub trait KeyExtractor: Send + Sync + 'static {
    /// The lock names `req` needs.
    fn extract(&self, req: &dyn RequestView) -> Result<Keys, KeyError>;

    /// Lock only requests whose method is one of `methods` (compared upper case, e.g.
    /// `["PUT", "POST", "PATCH", "DELETE"]`); the others pass through without a lock.
    fn only_methods<I, M>(self, methods: I) -> Methods<Self>
    where
        Self: Sized,
        I: IntoIterator<Item = M>,
        M: AsRef<str>,
    {
        Methods::new(self, methods, true)
    }

    /// Lock every request except those whose method is one of `methods` (e.g. `["GET", "HEAD"]`
    /// for "reads do not lock"); those pass through without a lock.
    fn skip_methods<I, M>(self, methods: I) -> Methods<Self>
    where
        Self: Sized,
        I: IntoIterator<Item = M>,
        M: AsRef<str>,
    {
        Methods::new(self, methods, false)
    }

    /// Lock the names of both extractors (a composite key: all of them, acquired in sorted order).
    fn and<E: KeyExtractor>(self, other: E) -> Both<Self, E>
    where
        Self: Sized,
    {
        Both(self, other)
    }

    /// Put `prefix` before every name, to keep names from different sources apart (a header value
    /// `accounts/42` must not lock the same thing as the path `/accounts/42` unless you mean it).
    fn prefix(self, prefix: impl Into<String>) -> Prefixed<Self>
    where
        Self: Sized,
    {
        Prefixed {
            inner: self,
            prefix: prefix.into(),
        }
    }
}

impl<E: KeyExtractor + ?Sized> KeyExtractor for Box<E> {
    fn extract(&self, req: &dyn RequestView) -> Result<Keys, KeyError> {
        (**self).extract(req)
    }
}

impl<E: KeyExtractor + ?Sized> KeyExtractor for Arc<E> {
    fn extract(&self, req: &dyn RequestView) -> Result<Keys, KeyError> {
        (**self).extract(req)
    }
}

/// An extractor that only locks some methods: see [`KeyExtractor::only_methods`] and
/// [`KeyExtractor::skip_methods`].
#[derive(Debug, Clone)]
pub struct Methods<E> {
    inner: E,
    methods: Vec<String>,
    /// Lock the listed methods (true) or every method but them (false).
    listed_lock: bool,
}

impl<E> Methods<E> {
    fn new<I, M>(inner: E, methods: I, listed_lock: bool) -> Self
    where
        I: IntoIterator<Item = M>,
        M: AsRef<str>,
    {
        Methods {
            inner,
            methods: methods
                .into_iter()
                .map(|m| m.as_ref().to_ascii_uppercase())
                .collect(),
            listed_lock,
        }
    }
}

impl<E: KeyExtractor> KeyExtractor for Methods<E> {
    fn extract(&self, req: &dyn RequestView) -> Result<Keys, KeyError> {
        let method = req.method();
        let listed = self.methods.iter().any(|m| m == method);
        if listed == self.listed_lock {
            self.inner.extract(req)
        } else {
            Ok(Keys::none())
        }
    }
}

/// The names of two extractors together: see [`KeyExtractor::and`].
#[derive(Debug, Clone)]
pub struct Both<A, B>(A, B);

impl<A: KeyExtractor, B: KeyExtractor> KeyExtractor for Both<A, B> {
    fn extract(&self, req: &dyn RequestView) -> Result<Keys, KeyError> {
        let mut keys = self.0.extract(req)?;
        keys.extend(self.1.extract(req)?);
        Ok(keys)
    }
}

/// Names with a prefix: see [`KeyExtractor::prefix`].
#[derive(Debug, Clone)]
pub struct Prefixed<E> {
    inner: E,
    prefix: String,
}

impl<E: KeyExtractor> KeyExtractor for Prefixed<E> {
    fn extract(&self, req: &dyn RequestView) -> Result<Keys, KeyError> {
        self.inner
            .extract(req)?
            .try_map(|key| LockKey::new(format!("{}{}", self.prefix, key.as_str())))
    }
}

/// A closure as an extractor: see [`from_fn`](super::from_fn).
#[derive(Clone)]
pub struct FromFn<F>(pub(super) F);

impl<F> std::fmt::Debug for FromFn<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FromFn")
    }
}

impl<F, R> KeyExtractor for FromFn<F>
where
    F: Fn(&dyn RequestView) -> R + Send + Sync + 'static,
    R: IntoKeys,
{
    fn extract(&self, req: &dyn RequestView) -> Result<Keys, KeyError> {
        (self.0)(req).into_keys()
    }
}

/// The value of a header as the lock name: see [`header`](super::header).
#[derive(Debug, Clone)]
pub struct Header {
    pub(super) name: String,
    pub(super) optional: bool,
}

impl Header {
    /// Let requests without the header through without a lock, instead of rejecting them with
    /// 400 Bad Request (the default).
    ///
    /// Each such request is counted and logged by the layer (see [`Keys::unmatched`]). An empty
    /// or non-UTF-8 value is still rejected.
    pub fn optional(mut self) -> Self {
        self.optional = true;
        self
    }

    /// Reject requests without the header with 400 Bad Request: the default, kept so that code
    /// written when it was not compiles and means what it meant. Undoes
    /// [`optional`](Self::optional).
    pub fn required(mut self) -> Self {
        self.optional = false;
        self
    }
}

impl KeyExtractor for Header {
    fn extract(&self, req: &dyn RequestView) -> Result<Keys, KeyError> {
        let Some(value) = req.header(&self.name) else {
            if self.optional {
                return Ok(Keys::unmatched(format!("header {}", self.name)));
            }
            return Err(KeyError::Extract(format!(
                "header {} is missing",
                self.name
            )));
        };
        let value = std::str::from_utf8(value)
            .map_err(|_| KeyError::Extract(format!("header {} is not UTF-8", self.name)))?
            .trim();
        if value.is_empty() {
            return Err(KeyError::Extract(format!("header {} is empty", self.name)));
        }
        LockKey::new(value).map(Keys::one)
    }
}

/// The whole request path as the lock name: see [`path`](super::path).
#[derive(Debug, Clone, Copy, Default)]
pub struct Path;

impl KeyExtractor for Path {
    fn extract(&self, req: &dyn RequestView) -> Result<Keys, KeyError> {
        let path = req.path();
        let mut name = String::with_capacity(path.len().max(1));
        for segment in super::canonical::segments(path) {
            name.push('/');
            super::canonical::push_segment(segment, &mut name);
        }
        if name.is_empty() {
            name.push('/');
        }
        LockKey::new(name).map(Keys::one)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key;

    fn names(
        extractor: &dyn KeyExtractor,
        req: &http::Request<()>,
    ) -> Result<Vec<String>, KeyError> {
        Ok(extractor
            .extract(req)?
            .into_sorted()
            .iter()
            .map(LockKey::to_string)
            .collect())
    }

    fn request(method: &str, path: &str) -> http::Request<()> {
        http::Request::builder()
            .method(method)
            .uri(path)
            .header("x-b", "2")
            .body(())
            .expect("request")
    }

    #[test]
    fn extractors_are_object_safe_and_combine() {
        let boxed: Box<dyn KeyExtractor> = Box::new(
            key::pattern("/a/{id}")
                .optional()
                .and(key::header("x-b").prefix("b:"))
                .and(key::from_fn(|_req: &dyn RequestView| Some("a/1")))
                .only_methods(["put", "POST"]),
        );
        let put = request("PUT", "/a/1/x");
        assert_eq!(
            names(&boxed, &put),
            Ok(vec!["a/1".into(), "b:2".into()]),
            "deduplicated, sorted"
        );
        assert_eq!(
            names(&boxed, &request("POST", "/z")),
            Ok(vec!["a/1".into(), "b:2".into()])
        );
        assert_eq!(names(&boxed, &request("GET", "/a/1")), Ok(vec![]));
    }

    #[test]
    fn path_and_header_rules() {
        assert_eq!(
            names(&key::path(), &request("GET", "/")),
            Ok(vec!["/".into()])
        );
        assert_eq!(
            names(&key::path(), &request("GET", "/a//b%2f/?q=1")),
            Ok(vec!["/a/b%2F".into()])
        );
        let missing = key::header("x-missing");
        assert!(matches!(
            names(&missing, &request("PUT", "/")),
            Err(KeyError::Extract(why)) if why == "header x-missing is missing"
        ));
        assert!(matches!(
            names(&missing.clone().optional().required(), &request("PUT", "/")),
            Err(KeyError::Extract(_))
        ));
        let optional = missing.optional().prefix("m:").and(key::path());
        let keys = optional.extract(&request("PUT", "/a")).expect("optional");
        assert_eq!(keys.unmatched_by(), Some("header x-missing"));
        assert_eq!(keys.len(), 1, "the path is still locked");
        let failing = key::from_fn(
            |_req: &dyn RequestView| -> Result<Option<String>, KeyError> {
                Err(KeyError::Extract("no".into()))
            },
        );
        assert!(names(&failing, &request("PUT", "/")).is_err());
        let empty = key::from_fn(|_req: &dyn RequestView| Some(String::new()));
        assert_eq!(names(&empty, &request("PUT", "/")), Err(KeyError::Empty));
    }
}
