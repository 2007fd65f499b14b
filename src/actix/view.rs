//! [`RequestView`] for actix-web requests, so that the key extractors of [`key`](crate::key) serve
//! actix-web (on `http` 0.2) as they serve tower (on `http` 1.x); and its extensions as the request
//! core's [`Extensions`], so that owners and lock infos are stored there as in `http` requests.

use std::any::Any;

use actix_web::dev::ServiceRequest;
use actix_web::HttpMessage;

use crate::key::RequestView;
use crate::request::Extensions;

/// The method, the raw path (not percent-decoded, without the query), the headers and the
/// extensions (an [`actix_web::dev::Extensions`], which
/// [`extension`](crate::key::RequestView#method.extension) reads) of the request.
impl RequestView for ServiceRequest {
    fn method(&self) -> &str {
        ServiceRequest::method(self).as_str()
    }

    fn path(&self) -> &str {
        ServiceRequest::path(self)
    }

    fn header(&self, name: &str) -> Option<&[u8]> {
        self.headers()
            .get(name)
            .map(actix_web::http::header::HeaderValue::as_bytes)
    }

    fn visit_extensions(&self, visit: &mut dyn FnMut(&dyn Any)) {
        let extensions = self.extensions();
        visit(&*extensions);
    }
}

impl Extensions for actix_web::dev::Extensions {
    fn get<T: Send + Sync + 'static>(&self) -> Option<&T> {
        actix_web::dev::Extensions::get(self)
    }

    fn insert<T: Clone + Send + Sync + 'static>(&mut self, value: T) {
        actix_web::dev::Extensions::insert(self, value);
    }

    fn remove<T: Send + Sync + 'static>(&mut self) -> Option<T> {
        actix_web::dev::Extensions::remove(self)
    }
}

#[cfg(test)]
mod tests {
    use actix_web::test::TestRequest;

    use super::*;
    use crate::key::{self, KeyExtractor};

    #[derive(Clone, Debug, PartialEq)]
    struct UserId(u64);

    #[test]
    fn service_requests_are_request_views() {
        let req = TestRequest::with_uri("/accounts/4%32/orders?dry_run=1")
            .method(actix_web::http::Method::PATCH)
            .insert_header(("X-Tenant", "acme"))
            .insert_header(("x-raw", &b"\xff"[..]))
            .to_srv_request();
        req.extensions_mut().insert(UserId(7));
        let view: &dyn RequestView = &req;
        assert_eq!(view.method(), "PATCH");
        assert_eq!(view.path(), "/accounts/4%32/orders");
        assert_eq!(view.header_str("x-tenant"), Some("acme"));
        assert_eq!(
            view.header_str("X-TENANT"),
            Some("acme"),
            "case-insensitive"
        );
        assert_eq!(view.header("x-raw"), Some(&b"\xff"[..]));
        assert_eq!(view.header_str("x-raw"), None, "not UTF-8");
        assert_eq!(view.header("missing"), None);
        assert_eq!(view.extension::<UserId>(), Some(UserId(7)));
        assert_eq!(view.extension::<u32>(), None);
    }

    #[test]
    fn the_built_in_extractors_read_actix_requests() {
        let req = TestRequest::put()
            .uri("/accounts/4%32/orders")
            .insert_header(("x-tenant", "acme"))
            .to_srv_request();
        req.extensions_mut().insert(UserId(7));
        let extractor = key::pattern("/accounts/{id}")
            .and(key::header("x-tenant").prefix("tenant:"))
            .and(key::from_fn(|req: &dyn RequestView| {
                req.extension::<UserId>()
                    .map(|UserId(id)| format!("user:{id}"))
            }))
            .only_methods(["PUT"]);
        let names: Vec<String> = extractor
            .extract(&req)
            .map(|keys| keys.into_sorted().iter().map(|k| k.to_string()).collect())
            .unwrap_or_default();
        assert_eq!(names, ["accounts/42", "tenant:acme", "user:7"]);

        let get = TestRequest::get().uri("/accounts/42").to_srv_request();
        assert!(extractor.extract(&get).is_ok_and(|keys| keys.is_empty()));
        let path = key::path().extract(&get).map(|keys| keys.into_sorted());
        assert_eq!(
            path.map(|k| k[0].to_string()).ok().as_deref(),
            Some("/accounts/42")
        );
    }
}
