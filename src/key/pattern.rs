//! `key::pattern("/accounts/{id}")`: the resource a path is about, as a lock name.

use super::canonical::{push_segment, push_value, raw_segments, segments};
use super::extract::KeyExtractor;
use super::keys::Keys;
use super::view::RequestView;
use super::LockKey;
use crate::error::KeyError;

#[derive(Debug, Clone, PartialEq, Eq)]
enum Segment {
    /// Must equal the path's segment (compared in canonical form).
    Literal(String),
    /// `{name}`: any one non-empty segment.
    Param(String),
}

/// A path pattern as an extractor: see [`pattern`](super::pattern).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pattern {
    text: String,
    segments: Vec<Segment>,
    optional: bool,
}

impl Pattern {
    /// Parse `pattern`, refusing one that cannot be what its author meant.
    pub(super) fn parse(pattern: &str) -> Result<Self, KeyError> {
        let refuse = |reason: String| KeyError::Pattern {
            pattern: pattern.to_owned(),
            reason,
        };
        if pattern.trim().is_empty() {
            return Err(refuse(
                "it is empty; write \"/\" to lock every path under one name".into(),
            ));
        }
        let mut parsed_segments = Vec::new();
        for segment in segments(pattern) {
            let parsed = parse_segment(segment).map_err(refuse)?;
            if let Segment::Param(name) = &parsed {
                if parsed_segments.contains(&parsed) {
                    return Err(refuse(format!(
                        "the parameter {{{name}}} is named twice; give each parameter its own name"
                    )));
                }
            }
            parsed_segments.push(parsed);
        }
        Ok(Pattern {
            text: pattern.to_owned(),
            segments: parsed_segments,
            optional: false,
        })
    }

    /// Let requests the pattern does not match through without a lock, instead of rejecting them
    /// with 400 Bad Request (gRPC `INVALID_ARGUMENT`), the default.
    ///
    /// Each such request is counted (`LockLayer::unlocked_counter`, and
    /// `tower_lock_unmatched_total` with feature `metrics`) and logged at WARN, once a minute per
    /// route: a router nested under a prefix the pattern omits then shows in the logs, not as
    /// handlers that silently run unlocked. Prefer narrowing the layer to the routes it guards
    /// (axum's `route_layer`, [`KeyExtractor::only_methods`]).
    pub fn optional(mut self) -> Self {
        self.optional = true;
        self
    }

    /// Reject requests the pattern does not match with 400 Bad Request: the default, kept so that
    /// code written when it was not compiles and means what it meant. Undoes
    /// [`optional`](Self::optional).
    pub fn required(mut self) -> Self {
        self.optional = false;
        self
    }

    /// The pattern as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The lock name for `path`, or `None` when the pattern does not match it.
    pub fn name_for(&self, path: &str) -> Option<String> {
        if self.segments.is_empty() {
            return Some("/".to_owned());
        }
        let mut name = String::with_capacity(path.len());
        let mut path_segments = raw_segments(path);
        for (i, segment) in self.segments.iter().enumerate() {
            // An empty segment (`//`) matches nothing: routers do not skip it either.
            let raw = path_segments.next().filter(|raw| !raw.is_empty())?;
            if i > 0 {
                name.push('/');
            }
            let start = name.len();
            push_segment(raw, &mut name);
            if let Segment::Literal(literal) = segment {
                if name.get(start..) != Some(literal.as_str()) {
                    return None;
                }
            }
        }
        Some(name)
    }

    /// The lock name a request gets for the resource whose parameters are `params` (decoded
    /// values, as the application knows them): the same name the layer derives from a request
    /// for it, so that a background job locks what the layer locks.
    ///
    /// `("id", "a/b")` gives `accounts/a%2Fb` for `/accounts/{id}`, as the request
    /// `PUT /accounts/a%2Fb` does. Every parameter of the pattern must be given, once, non-empty,
    /// and no other.
    ///
    /// ```
    /// let accounts = tower_lock::key::pattern("/accounts/{id}");
    /// assert_eq!(accounts.name_with(&[("id", "42")]).unwrap(), "accounts/42");
    /// assert_eq!(accounts.name_with(&[("id", "a/b")]).unwrap(), "accounts/a%2Fb");
    /// assert_eq!(accounts.name_for("/accounts/a%2fb").unwrap(), "accounts/a%2Fb");
    /// assert!(accounts.name_with(&[("user", "42")]).is_err());
    /// ```
    pub fn name_with(&self, params: &[(&str, &str)]) -> Result<String, KeyError> {
        let wrong = |why: String| KeyError::Extract(format!("pattern {}: {why}", self.text));
        for (i, (name, _)) in params.iter().enumerate() {
            if !self.segments.contains(&Segment::Param((*name).to_owned())) {
                return Err(wrong(format!("it has no parameter {{{name}}}")));
            }
            if params[..i].iter().any(|(earlier, _)| earlier == name) {
                return Err(wrong(format!("the parameter {{{name}}} is given twice")));
            }
        }
        if self.segments.is_empty() {
            return Ok("/".to_owned());
        }
        let mut out = String::new();
        for (i, segment) in self.segments.iter().enumerate() {
            if i > 0 {
                out.push('/');
            }
            match segment {
                Segment::Literal(literal) => out.push_str(literal),
                Segment::Param(name) => {
                    let value = params
                        .iter()
                        .find(|(given, _)| given == name)
                        .map(|(_, value)| *value)
                        .ok_or_else(|| wrong(format!("the parameter {{{name}}} is not given")))?;
                    if value.is_empty() {
                        return Err(wrong(format!("the parameter {{{name}}} is empty")));
                    }
                    push_value(value, &mut out);
                }
            }
        }
        Ok(out)
    }
}

/// One segment of a pattern: a literal, or `{name}`; anything else is refused with the reason.
fn parse_segment(segment: &str) -> Result<Segment, String> {
    if let Some(name) = segment.strip_prefix(':') {
        return Err(format!(
            "{segment:?} is the old axum syntax (0.7 and before); write {{{name}}}"
        ));
    }
    if let Some(name) = segment.strip_prefix('*') {
        return Err(format!(
            "{segment:?} is the old axum wildcard syntax; a pattern already covers every path \
             below it: drop the wildcard, or lock the whole path with key::path() ({name:?})"
        ));
    }
    let has_brace = segment.contains(['{', '}']);
    if !has_brace {
        let mut literal = String::with_capacity(segment.len());
        push_segment(segment, &mut literal);
        return Ok(Segment::Literal(literal));
    }
    let name = segment
        .strip_prefix('{')
        .and_then(|rest| rest.strip_suffix('}'))
        .filter(|name| !name.contains(['{', '}']));
    match name {
        Some("") => Err(format!("{segment:?} names no parameter; write {{id}}")),
        Some(name) if name.starts_with('*') => Err(format!(
            "{segment:?} is a wildcard; a pattern already covers every path below it: drop it, \
             or lock the whole path with key::path()"
        )),
        Some(name) => Ok(Segment::Param(name.to_owned())),
        None if segment.matches('{').count() != segment.matches('}').count() => Err(format!(
            "{segment:?} has unbalanced braces; a parameter is a whole segment such as {{id}}"
        )),
        None => Err(format!(
            "{segment:?} puts a parameter inside a segment; a parameter is a whole segment such \
             as {{id}}"
        )),
    }
}

impl KeyExtractor for Pattern {
    fn extract(&self, req: &dyn RequestView) -> Result<Keys, KeyError> {
        match self.name_for(req.path()) {
            Some(name) => LockKey::new(name).map(Keys::one),
            None if self.optional => Ok(Keys::unmatched(format!("pattern {}", self.text))),
            None => Err(KeyError::Extract(format!(
                "path {} does not match the lock pattern {}",
                req.path(),
                self.text
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::{pattern, try_pattern};

    #[test]
    fn matches_the_path_and_every_path_below_it() {
        let p = pattern("/accounts/{id}");
        assert_eq!(p.name_for("/accounts/42").as_deref(), Some("accounts/42"));
        assert_eq!(
            p.name_for("/accounts/42/orders/7").as_deref(),
            Some("accounts/42")
        );
        assert_eq!(p.name_for("/accounts/42/").as_deref(), Some("accounts/42"));
        assert_eq!(p.name_for("/accounts/4%32").as_deref(), Some("accounts/42"));
        assert_eq!(p.name_for("/accounts"), None);
        assert_eq!(p.name_for("/accounts/"), None);
        assert_eq!(p.name_for("/users/42"), None);
        assert_eq!(
            p.name_for("/Accounts/42"),
            None,
            "literals are case-sensitive"
        );
        assert_eq!(p.name_for("/"), None);
    }

    #[test]
    fn several_params_cannot_be_confused() {
        let p = pattern("/orgs/{org}/repos/{repo}");
        assert_eq!(
            p.name_for("/orgs/acme/repos/web/issues").as_deref(),
            Some("orgs/acme/repos/web")
        );
        let two = pattern("/x/{a}/{b}");
        let left = two.name_for("/x/p%2Fq/r");
        let right = two.name_for("/x/p/q%2Fr");
        assert_ne!(left, right);
        assert_eq!(left.as_deref(), Some("x/p%2Fq/r"));
    }

    #[test]
    fn literal_spellings_match_and_root_pattern_locks_everything() {
        let p = pattern("/caf\u{e9}/{id}");
        assert_eq!(p.name_for("/caf%C3%A9/1").as_deref(), Some("caf%C3%A9/1"));
        assert_eq!(pattern("/").name_for("/anything").as_deref(), Some("/"));
        assert_eq!(pattern("/{id}").name_for("/7/x").as_deref(), Some("7"));
    }

    #[test]
    fn empty_segments_never_match() {
        let p = pattern("/accounts/{id}");
        assert_eq!(p.name_for("/accounts//deposit/1"), None);
        assert_eq!(p.name_for("//accounts/42"), None);
        assert_eq!(
            p.name_for("/accounts/42//x").as_deref(),
            Some("accounts/42")
        );
        let literal = pattern("/a/b/{id}");
        assert_eq!(literal.name_for("/a//b/1"), None);
    }

    #[test]
    fn patterns_reject_what_they_do_not_match_unless_optional() {
        let p = pattern("/accounts/{id}");
        let get = |path: &str| http::Request::get(path).body(()).expect("request");
        assert!(matches!(
            p.extract(&get("/api/accounts/42")),
            Err(KeyError::Extract(_))
        ));
        assert!(matches!(
            p.extract(&get("/accounts//deposit/1")),
            Err(KeyError::Extract(_))
        ));
        let names: Vec<String> = p
            .extract(&get("/accounts/42"))
            .expect("matched")
            .iter()
            .map(LockKey::to_string)
            .collect();
        assert_eq!(names, ["accounts/42"]);
    }

    #[test]
    fn patterns_that_cannot_be_meant_are_refused_with_a_message_naming_them() {
        for (bad, says) in [
            ("", "it is empty"),
            ("   ", "it is empty"),
            ("/accounts/{id", "unbalanced braces"),
            ("/accounts/id}", "unbalanced braces"),
            ("/accounts/{id}}", "unbalanced braces"),
            ("/accounts/:id", "old axum syntax"),
            ("/files/*rest", "old axum wildcard"),
            ("/files/{*rest}", "wildcard"),
            ("/accounts/{}", "names no parameter"),
            ("/accounts/x{id}", "inside a segment"),
            ("/a/{id}/b/{id}", "named twice"),
        ] {
            let err = try_pattern(bad).expect_err(bad);
            let message = err.to_string();
            assert!(message.contains(&format!("{bad:?}")), "{message}");
            assert!(message.contains(says), "{bad}: {message}");
        }
        let panic = std::panic::catch_unwind(|| pattern("/accounts/:id")).expect_err("panics");
        let message = panic.downcast_ref::<String>().expect("message");
        assert!(message.contains("\"/accounts/:id\""), "{message}");
        assert!(message.contains("write {id}"), "{message}");
        assert!(try_pattern("/").is_ok());
        assert!(try_pattern("accounts/{id}").is_ok());
        assert!(try_pattern("/users/{user}/x@y:1").is_ok());
    }

    #[test]
    fn name_with_gives_what_the_layer_derives_from_the_request() {
        let p = pattern("/orgs/{org}/caf\u{e9}/{id}");
        for (org, id, path) in [
            ("acme", "42", "/orgs/acme/caf%C3%A9/42/x"),
            ("a/b", "100%", "/orgs/a%2Fb/caf\u{e9}/100%25"),
            ("a b", "4%32", "/orgs/a%20b/caf%c3%a9/4%2532"),
        ] {
            let by_helper = p.name_with(&[("id", id), ("org", org)]).expect("name");
            assert_eq!(Some(by_helper), p.name_for(path), "{path}");
        }
        let wrong = |params: &[(&str, &str)]| p.name_with(params).expect_err("wrong").to_string();
        assert!(wrong(&[("org", "a")]).contains("{id} is not given"));
        assert!(wrong(&[("org", "a"), ("id", "")]).contains("{id} is empty"));
        assert!(wrong(&[("org", "a"), ("id", "1"), ("x", "1")]).contains("no parameter {x}"));
        assert!(wrong(&[("org", "a"), ("org", "b"), ("id", "1")]).contains("given twice"));
        assert_eq!(pattern("/").name_with(&[]).as_deref(), Ok("/"));
    }

    #[test]
    fn optional_patterns_say_which_pattern_did_not_match() {
        let get = http::Request::get("/health").body(()).expect("request");
        let keys = pattern("/accounts/{id}")
            .optional()
            .extract(&get)
            .expect("ok");
        assert!(keys.is_empty());
        assert_eq!(keys.unmatched_by(), Some("pattern /accounts/{id}"));
        let err = pattern("/accounts/{id}")
            .extract(&get)
            .expect_err("rejected");
        assert_eq!(
            err.to_string(),
            "cannot derive a lock key from the request: path /health does not match the lock \
             pattern /accounts/{id}"
        );
    }
}
