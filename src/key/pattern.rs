//! `key::pattern("/accounts/{id}")`: the resource a path is about, as a lock name.

use super::canonical::{push_segment, segments};
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
        Pattern { segments }
    }

    /// The lock name for `path`, or `None` when the pattern does not match it.
    pub fn name_for(&self, path: &str) -> Option<String> {
        if self.segments.is_empty() {
            return Some("/".to_owned());
        }
        let mut name = String::with_capacity(path.len());
        let mut path_segments = segments(path);
        for (i, segment) in self.segments.iter().enumerate() {
            let raw = path_segments.next()?;
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
}
