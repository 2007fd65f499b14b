//! `axum::params(["id"])`: the resource a matched route is about, named by the path parameters
//! the user chose, as the lock name that `key::pattern` gives for the same route.

use super::route::{matched, no_route};
use crate::error::KeyError;
use crate::key::canonical::{push_segment, push_value, segments};
use crate::key::{KeyExtractor, Keys, LockKey, RequestView};

/// Lock the resource that the path parameters `names` identify in the route axum matched:
/// on the route `/accounts/{id}/deposit/{amount}`, `params(["id"])` locks `accounts/42` for
/// `PUT /accounts/42/deposit/100` and for every other amount, so deposits to one account exclude
/// each other whatever their amounts.
///
/// The name is the matched route (nest prefixes included) up to its last named parameter, as
/// [`key::pattern`](crate::key::pattern) spells it: each named parameter replaced by its value,
/// literals and values in canonical spelling. So `params(["id"])` on `/accounts/{id}/deposit/{amount}`
/// and `key::pattern("/accounts/{id}")` lock the same name, and a background job gets it from
/// [`Pattern::name_with`](crate::key::Pattern::name_with). A parameter before the last named one
/// that is not named stays as written (`params(["amount"])` locks `accounts/{id}/deposit/100`:
/// every account's deposits of 100 exclude each other, as written). A wildcard `{*rest}` that is
/// named contributes each of its segments.
///
/// A request whose route lacks a named parameter is rejected with 400 naming the route and the
/// parameter; so is a request without a matched route (the router's fallback, or a layer around
/// the whole router), unless the extractor is [`Params::optional`]. Put the layer on with
/// `route_layer`. The actix-web middleware never finds an axum route.
///
/// # Panics
///
/// When `names` is empty, or a name is empty or holds a brace: a mistake in the program, found
/// at start-up. [`try_params`] returns it as a [`KeyError::Pattern`] instead.
#[track_caller]
pub fn params<I, N>(names: I) -> Params
where
    I: IntoIterator<Item = N>,
    N: Into<String>,
{
    match try_params(names) {
        Ok(params) => params,
        Err(err) => panic!("{err}"),
    }
}

/// [`params`] for names that may be wrong, such as names read from configuration.
pub fn try_params<I, N>(names: I) -> Result<Params, KeyError>
where
    I: IntoIterator<Item = N>,
    N: Into<String>,
{
    let mut unique: Vec<String> = Vec::new();
    for name in names {
        let name = name.into();
        if name.is_empty() || name.contains(['{', '}', '/']) {
            return Err(KeyError::Pattern {
                pattern: format!("{{{name}}}"),
                reason: "a parameter name is the text between the braces of the route, such \
                         as id for /accounts/{id}"
                    .into(),
            });
        }
        if !unique.contains(&name) {
            unique.push(name);
        }
    }
    if unique.is_empty() {
        return Err(KeyError::Pattern {
            pattern: String::new(),
            reason: "params names no parameter; name the ones that identify the resource, \
                     such as params([\"id\"])"
                .into(),
        });
    }
    Ok(Params {
        names: unique,
        optional: false,
    })
}

/// The path parameters that name the lock: see [`params`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Params {
    names: Vec<String>,
    optional: bool,
}

impl Params {
    /// Let requests without a matched route through without a lock (counted and logged) instead
    /// of rejecting them with 400 (the default). A route that lacks a named parameter is still
    /// rejected: that is a mistake, not a request the layer is not meant for.
    pub fn optional(mut self) -> Self {
        self.optional = true;
        self
    }

    /// The lock name for a request on `route` (as axum's `MatchedPath` spells it) with the
    /// decoded parameter values `values`.
    fn name(&self, route: &str, values: &[(String, String)]) -> Result<String, KeyError> {
        let route_segments: Vec<&str> = segments(route).collect();
        let mut last = None;
        for name in &self.names {
            let at = route_segments
                .iter()
                .position(|segment| params_in(segment).iter().any(|p| p == name))
                .ok_or_else(|| {
                    KeyError::Extract(format!("route {route} has no path parameter {{{name}}}"))
                })?;
            last = last.max(Some(at));
        }
        let mut out = String::with_capacity(route.len());
        for (i, segment) in route_segments
            .iter()
            .take(last.map_or(0, |at| at + 1))
            .enumerate()
        {
            if i > 0 {
                out.push('/');
            }
            self.push_route_segment(segment, values, &mut out)?;
        }
        Ok(out)
    }

    /// Append one segment of the route: literals canonical, named parameters by value, other
    /// parameters as written.
    fn push_route_segment(
        &self,
        segment: &str,
        values: &[(String, String)],
        out: &mut String,
    ) -> Result<(), KeyError> {
        let mut rest = segment;
        while let Some(open) = rest.find('{') {
            let close = rest[open..].find('}').map_or(rest.len(), |at| open + at);
            push_segment(&rest[..open], out);
            let param = rest.get(open + 1..close).unwrap_or_default();
            let name = param.trim_start_matches('*');
            if self.names.iter().any(|named| named == name) {
                let value = values
                    .iter()
                    .find(|(key, _)| key == name)
                    .map(|(_, value)| value.as_str())
                    .ok_or_else(|| {
                        KeyError::Extract(format!("path parameter {{{name}}} has no value"))
                    })?;
                push_param(value, param.starts_with('*'), out);
            } else {
                out.push('{');
                out.push_str(param);
                out.push('}');
            }
            rest = rest.get(close + 1..).unwrap_or_default();
        }
        push_segment(rest, out);
        Ok(())
    }
}

/// The parameter names in one route segment (`{id}` has `id`; `{*rest}` has `rest`).
fn params_in(segment: &str) -> Vec<String> {
    segment
        .split('{')
        .skip(1)
        .filter_map(|part| part.split_once('}'))
        .map(|(param, _)| param.trim_start_matches('*').to_owned())
        .collect()
}

/// Append a decoded parameter value; a wildcard's `/` separates segments, as in the path.
fn push_param(value: &str, wildcard: bool, out: &mut String) {
    if !wildcard {
        push_value(value, out);
        return;
    }
    for (i, piece) in value.trim_start_matches('/').split('/').enumerate() {
        if i > 0 {
            out.push('/');
        }
        push_value(piece, out);
    }
}

impl KeyExtractor for Params {
    fn extract(&self, req: &dyn RequestView) -> Result<Keys, KeyError> {
        let Some((route, values)) = matched(req)? else {
            return no_route(req, self.optional);
        };
        LockKey::new(self.name(&route, &values)?).map(Keys::one)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn names_follow_the_route_up_to_the_last_named_parameter() {
        let route = "/accounts/{id}/deposit/{amount}";
        let both = values(&[("id", "a/b"), ("amount", "100")]);
        let name = |names: &[&str]| params(names.iter().copied()).name(route, &both);
        assert_eq!(name(&["id"]), Ok("accounts/a%2Fb".into()));
        assert_eq!(
            name(&["amount", "id"]),
            Ok("accounts/a%2Fb/deposit/100".into())
        );
        assert_eq!(name(&["amount"]), Ok("accounts/{id}/deposit/100".into()));
        let missing = name(&["acct"]).unwrap_err().to_string();
        assert!(
            missing.contains("route /accounts/{id}/deposit/{amount} has no path parameter {acct}"),
            "{missing}"
        );
        let files = params(["path"]).name("/files/{*path}", &values(&[("path", "a b/c")]));
        assert_eq!(files, Ok("files/a%20b/c".into()));
    }

    #[test]
    fn names_that_cannot_be_meant_are_refused() {
        assert!(try_params(Vec::<String>::new()).is_err());
        assert!(try_params([""]).is_err());
        assert!(try_params(["{id}"]).is_err());
        assert_eq!(try_params(["id", "id"]), Ok(params(["id"])));
    }
}
