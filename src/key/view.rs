//! `RequestView`: what a key extractor may read from a request, in plain types, so that one set of
//! extractors serves every web stack (`http` 1.x for tower, axum and tonic; `http` 0.2 for actix-web).

use std::any::Any;

/// A read-only view of an incoming request: its method, path, headers and extensions.
///
/// It is object-safe and speaks in plain types (`&str`, `&[u8]`, `&dyn Any`) rather than the types of
/// one `http` crate version, so that requests of any web stack can implement it. The crate implements
/// it for [`http::Request`]; extractors receive it as `&dyn RequestView`.
///
/// ```
/// use tower_lock::key::RequestView;
///
/// let req = http::Request::put("/accounts/42?dry_run=1")
///     .header("x-tenant", "acme")
///     .body(())
///     .unwrap();
/// let view: &dyn RequestView = &req;
/// assert_eq!(view.method(), "PUT");
/// assert_eq!(view.path(), "/accounts/42");
/// assert_eq!(view.header_str("X-Tenant"), Some("acme"));
/// ```
pub trait RequestView {
    /// The request method, upper case as sent (`"GET"`, `"PUT"`, ...).
    fn method(&self) -> &str;

    /// The path of the request target, without the query string (`"/accounts/42"`), as sent: not
    /// percent-decoded.
    fn path(&self) -> &str;

    /// The raw value of the first header named `name` (case-insensitive), if any.
    fn header(&self, name: &str) -> Option<&[u8]>;

    /// Hand the request's extension container (for `http` 1.x requests, an [`http::Extensions`]) to
    /// `visit`, if the request has one. A visitor rather than a returned reference, so that stacks
    /// that keep extensions behind a `RefCell` (actix-web) can implement it; read typed values with
    /// [`extension`](trait.RequestView.html#method.extension).
    fn visit_extensions(&self, visit: &mut dyn FnMut(&dyn Any));
}

impl dyn RequestView + '_ {
    /// The value of header `name` when it is valid UTF-8.
    pub fn header_str(&self, name: &str) -> Option<&str> {
        self.header(name)
            .and_then(|value| std::str::from_utf8(value).ok())
    }

    /// A clone of the request extension of type `T`, if the request carries one (for example a
    /// user id that an authentication layer put there before the lock layer).
    ///
    /// ```
    /// use tower_lock::key::RequestView;
    ///
    /// #[derive(Clone, Debug, PartialEq)]
    /// struct UserId(u64);
    ///
    /// let mut req = http::Request::new(());
    /// req.extensions_mut().insert(UserId(7));
    /// let view: &dyn RequestView = &req;
    /// assert_eq!(view.extension::<UserId>(), Some(UserId(7)));
    /// ```
    pub fn extension<T: Clone + Send + Sync + 'static>(&self) -> Option<T> {
        let mut found = None;
        self.visit_extensions(&mut |container: &dyn Any| {
            if let Some(extensions) = container.downcast_ref::<http::Extensions>() {
                found = extensions.get::<T>().cloned();
            }
            #[cfg(feature = "actix")]
            if let Some(extensions) = container.downcast_ref::<actix_web::dev::Extensions>() {
                found = extensions.get::<T>().cloned();
            }
        });
        found
    }
}

impl<B> RequestView for http::Request<B> {
    fn method(&self) -> &str {
        self.method().as_str()
    }

    fn path(&self) -> &str {
        self.uri().path()
    }

    fn header(&self, name: &str) -> Option<&[u8]> {
        self.headers().get(name).map(http::HeaderValue::as_bytes)
    }

    fn visit_extensions(&self, visit: &mut dyn FnMut(&dyn Any)) {
        visit(self.extensions());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn http_request_view_reads_plain_values() {
        let req = http::Request::builder()
            .method("DELETE")
            .uri("http://example.com/a/b?x=1")
            .header("X-Id", &b"\xff\xfe"[..])
            .body(())
            .expect("request");
        let view: &dyn RequestView = &req;
        assert_eq!(view.method(), "DELETE");
        assert_eq!(view.path(), "/a/b");
        assert_eq!(view.header("x-id"), Some(&b"\xff\xfe"[..]));
        assert_eq!(view.header_str("x-id"), None, "not UTF-8");
        assert_eq!(view.header("missing"), None);
        assert_eq!(view.extension::<u32>(), None);
    }
}
