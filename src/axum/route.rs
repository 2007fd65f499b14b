//! `axum::route()`: the route axum matched and all its path parameters, as the lock name; and the
//! reading of the matched route that `axum::params` shares.

use ::axum::extract::{FromRequestParts, MatchedPath, RawPathParams};
use futures_util::FutureExt;

use crate::error::KeyError;
use crate::key::{KeyExtractor, Keys, LockKey, RequestView};

/// Lock one name per matched route and ALL its path parameters: `PUT /api/accounts/42` on the
/// route `/accounts/{id}` nested under `/api` locks `/api/accounts/{id}?id=42`.
///
/// Every parameter is part of the name, so on `PUT /accounts/{id}/deposit/{amount}` two deposits
/// of different amounts to one account lock two names and never exclude each other. Name the
/// parameters that identify the resource with [`params`](super::params) instead:
/// `params(["id"])` locks `accounts/42` for both.
///
/// The name is axum's `MatchedPath` (the route as written, nest prefixes included), then `?` and
/// each path parameter as `name=value`, joined by `&`, outermost first. Values are escaped (all but
/// letters, digits and `-._~`), so no value can pose as another parameter.
///
/// Where no route matched (the router's fallback, or a layer around the whole router) the request
/// is rejected with 400, unless the extractor is [`Route::optional`]. The actix-web middleware
/// never finds a route here.
#[deprecated(
    note = "locks by every path parameter: on /accounts/{id}/deposit/{amount} deposits of \
            different amounts never exclude each other; use tower_lock::axum::params([\"id\"])"
)]
pub fn route() -> Route {
    Route { optional: false }
}

/// The matched route and all its path parameters as the lock name: see [`route()`](super::route).
#[derive(Debug, Clone, Copy, Default)]
pub struct Route {
    optional: bool,
}

impl Route {
    /// Let requests without a matched route through without a lock (counted and logged) instead
    /// of rejecting them with 400 (the default).
    pub fn optional(mut self) -> Self {
        self.optional = true;
        self
    }

    /// Reject requests without a matched route with 400: the default, kept so that code written
    /// when it was not compiles and means what it meant. Undoes [`optional`](Self::optional).
    pub fn required(mut self) -> Self {
        self.optional = false;
        self
    }
}

impl KeyExtractor for Route {
    fn extract(&self, req: &dyn RequestView) -> Result<Keys, KeyError> {
        let Some((route, params)) = matched(req)? else {
            return no_route(req, self.optional);
        };
        let mut name = route;
        for (i, (key, value)) in params.iter().enumerate() {
            name.push(if i == 0 { '?' } else { '&' });
            name.push_str(key);
            name.push('=');
            push_escaped(value, &mut name);
        }
        LockKey::new(name).map(Keys::one)
    }
}

/// The route axum matched (nest prefixes included) and its raw path parameters, outermost first;
/// `None` when the request carries no matched route.
pub(super) type Matched = (String, Vec<(String, String)>);

/// Read the route axum matched for `req`, if it matched one.
pub(super) fn matched(req: &dyn RequestView) -> Result<Option<Matched>, KeyError> {
    let mut found = Ok(None);
    req.visit_extensions(&mut |container| {
        if let Some(extensions) = container.downcast_ref::<http::Extensions>() {
            found = matched_in(extensions);
        }
    });
    found
}

fn matched_in(extensions: &http::Extensions) -> Result<Option<Matched>, KeyError> {
    let Some(route) = extensions.get::<MatchedPath>() else {
        return Ok(None);
    };
    // axum keeps the parameters in a private extension: read them through its own extractor,
    // which never waits.
    let (mut parts, ()) = http::Request::new(()).into_parts();
    parts.extensions = extensions.clone();
    let params = RawPathParams::from_request_parts(&mut parts, &())
        .now_or_never()
        .ok_or_else(|| KeyError::Extract("path parameters are not ready".into()))?
        .map_err(|rejection| KeyError::Extract(rejection.body_text()))?;
    let params = params
        .iter()
        .map(|(key, value)| (key.to_owned(), value.to_owned()))
        .collect();
    Ok(Some((route.as_str().to_owned(), params)))
}

/// What an axum extractor answers for a request without a matched route.
pub(super) fn no_route(req: &dyn RequestView, optional: bool) -> Result<Keys, KeyError> {
    if optional {
        return Ok(Keys::unmatched("axum route (no route matched)"));
    }
    Err(KeyError::Extract(format!(
        "no axum route matched {} (put the lock layer on with route_layer)",
        req.path()
    )))
}

/// Append `value` with every byte but letters, digits and `-._~` escaped as `%XX`.
fn push_escaped(value: &str, out: &mut String) {
    for byte in value.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~".contains(&byte) {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
}

#[cfg(test)]
#[allow(deprecated)]
mod tests {
    use super::*;

    #[test]
    fn values_cannot_pose_as_parameters() {
        let mut out = String::new();
        push_escaped("1&b=2/x y%", &mut out);
        assert_eq!(out, "1%26b%3D2%2Fx%20y%25");
    }

    #[test]
    fn without_a_matched_route_the_request_is_rejected_unless_optional() {
        let req = http::Request::put("/accounts/42")
            .body(())
            .expect("request");
        assert!(matches!(route().extract(&req), Err(KeyError::Extract(_))));
        assert!(matches!(
            route().optional().required().extract(&req),
            Err(KeyError::Extract(_))
        ));
        let passed = route().optional().extract(&req).expect("optional");
        assert!(passed.is_empty());
        assert!(passed.unmatched_by().is_some());
    }
}
