//! `axum::route()`: the route axum matched and its path parameters, as the lock name.

use ::axum::extract::{FromRequestParts, MatchedPath, RawPathParams};
use futures_util::FutureExt;

use crate::error::KeyError;
use crate::key::{KeyExtractor, Keys, LockKey, RequestView};

/// Lock one name per matched route and path parameters: `PUT /api/accounts/42` on the route
/// `/accounts/{id}` nested under `/api` locks `/api/accounts/{id}?id=42`.
///
/// The name is axum's `MatchedPath` (the route as written, nest prefixes included), then `?` and
/// each path parameter as `name=value`, joined by `&`, outermost first. Values are escaped (all but
/// letters, digits and `-._~`), so no value can pose as another parameter. The name follows the
/// router: a route moved under another prefix locks a new name, and two routes of one resource
/// (`/accounts/{id}` and `/accounts/{id}/orders`) lock two names; for one lock per resource across
/// routes, use [`key::pattern`](crate::key::pattern).
///
/// axum sets `MatchedPath` when it matched a route. A layer added with `route_layer` (of a
/// `Router` or of a method router) or with `Router::layer` runs after routing and finds it. Where no
/// route matched (the router's fallback, which `Router::layer` wraps too) or for a layer around the
/// whole router (`ServiceBuilder::new().layer(..).service(router)`), there is none: the request
/// passes without a lock (logged and counted as unlocked), or is rejected with 400 when the
/// extractor is [`Route::required`]. The actix-web middleware never finds a route here.
pub fn route() -> Route {
    Route { required: false }
}

/// The matched route and its path parameters as the lock name: see [`route()`].
#[derive(Debug, Clone, Copy, Default)]
pub struct Route {
    required: bool,
}

impl Route {
    /// Reject requests without a matched route (400 Bad Request) instead of letting them through.
    ///
    /// Use it when every request behind the layer must be locked; keep the layer a `route_layer`
    /// then, or the router's 404s become 400s.
    pub fn required(mut self) -> Self {
        self.required = true;
        self
    }
}

impl KeyExtractor for Route {
    fn extract(&self, req: &dyn RequestView) -> Result<Keys, KeyError> {
        let mut name = Ok(None);
        req.visit_extensions(&mut |container| {
            if let Some(extensions) = container.downcast_ref::<http::Extensions>() {
                name = route_name(extensions);
            }
        });
        match name? {
            Some(name) => LockKey::new(name).map(Keys::one),
            None if self.required => Err(KeyError::Extract(format!(
                "no route matched {}",
                req.path()
            ))),
            None => Ok(Keys::none()),
        }
    }
}

/// The lock name of the route axum matched, if it matched one.
fn route_name(extensions: &http::Extensions) -> Result<Option<String>, KeyError> {
    let Some(matched) = extensions.get::<MatchedPath>() else {
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
    let mut name = matched.as_str().to_owned();
    for (i, (key, value)) in params.iter().enumerate() {
        name.push(if i == 0 { '?' } else { '&' });
        name.push_str(key);
        name.push('=');
        push_escaped(value, &mut name);
    }
    Ok(Some(name))
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
mod tests {
    use super::*;

    #[test]
    fn values_cannot_pose_as_parameters() {
        let mut out = String::new();
        push_escaped("1&b=2/x y%", &mut out);
        assert_eq!(out, "1%26b%3D2%2Fx%20y%25");
    }

    #[test]
    fn without_a_matched_route_nothing_is_locked_unless_required() {
        let req = http::Request::put("/accounts/42")
            .body(())
            .expect("request");
        assert_eq!(route().extract(&req), Ok(Keys::none()));
        assert!(matches!(
            route().required().extract(&req),
            Err(KeyError::Extract(_))
        ));
    }
}
