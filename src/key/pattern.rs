//! `key::pattern("/accounts/{id}")`: the resource a path is about, as a lock name.

use super::canonical::{push_segment, raw_segments, segments};
use super::extract::KeyExtractor;
use super::keys::Keys;
use super::view::RequestView;
use super::LockKey;
use crate::error::KeyError;

#[derive(Debug, Clone, PartialEq, Eq)]
enum Segment {
    /// Must equal the path's segment (compared in canonical form).
    Literal(String),
    /// `{name}`: any one segment.
    Param,
}

/// A path pattern as an extractor: see [`pattern`](super::pattern).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pattern {
    segments: Vec<Segment>,
    required: bool,
}

impl Pattern {
    pub(super) fn new(pattern: &str) -> Self {
        let segments = segments(pattern)
            .map(|segment| {
                if segment.len() >= 2 && segment.starts_with('{') && segment.ends_with('}') {
                    Segment::Param
                } else {
                    let mut literal = String::with_capacity(segment.len());
                    push_segment(segment, &mut literal);
                    Segment::Literal(literal)
                }
            })
            .collect();
        Pattern {
            segments,
            required: false,
        }
    }

    /// Reject requests the pattern does not match (400 Bad Request, gRPC `INVALID_ARGUMENT`)
    /// instead of letting them through without a lock.
    ///
    /// Use it when every request behind the layer must be locked: a router nested under a prefix
    /// the pattern omits, or a typo in the pattern, then shows up as 400s, not as handlers that
    /// silently run unlocked.
    pub fn required(mut self) -> Self {
        self.required = true;
        self
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
}

impl KeyExtractor for Pattern {
    fn extract(&self, req: &dyn RequestView) -> Result<Keys, KeyError> {
        match self.name_for(req.path()) {
            Some(name) => LockKey::new(name).map(Keys::one),
            None if self.required => Err(KeyError::Extract(format!(
                "path {} does not match the lock pattern",
                req.path()
            ))),
            None => Ok(Keys::none()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_the_path_and_every_path_below_it() {
        let p = Pattern::new("/accounts/{id}");
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
        let p = Pattern::new("/orgs/{org}/repos/{repo}");
        assert_eq!(
            p.name_for("/orgs/acme/repos/web/issues").as_deref(),
            Some("orgs/acme/repos/web")
        );
        let two = Pattern::new("/x/{a}/{b}");
        let left = two.name_for("/x/p%2Fq/r");
        let right = two.name_for("/x/p/q%2Fr");
        assert_ne!(left, right);
        assert_eq!(left.as_deref(), Some("x/p%2Fq/r"));
    }

    #[test]
    fn literal_spellings_match_and_root_pattern_locks_everything() {
        let p = Pattern::new("/caf\u{e9}/{id}");
        assert_eq!(p.name_for("/caf%C3%A9/1").as_deref(), Some("caf%C3%A9/1"));
        assert_eq!(
            Pattern::new("/").name_for("/anything").as_deref(),
            Some("/")
        );
        assert_eq!(Pattern::new("/{id}").name_for("/7/x").as_deref(), Some("7"));
    }

    #[test]
    fn empty_segments_never_match() {
        let p = Pattern::new("/accounts/{id}");
        assert_eq!(p.name_for("/accounts//deposit/1"), None);
        assert_eq!(p.name_for("//accounts/42"), None);
        assert_eq!(
            p.name_for("/accounts/42//x").as_deref(),
            Some("accounts/42")
        );
        let literal = Pattern::new("/a/b/{id}");
        assert_eq!(literal.name_for("/a//b/1"), None);
    }

    #[test]
    fn required_patterns_reject_what_they_do_not_match() {
        let p = Pattern::new("/accounts/{id}").required();
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
}
