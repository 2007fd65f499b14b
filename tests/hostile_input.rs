//! Hostile input: lock names and requests an attacker controls.
//!
//! Property tests of the key extractors (`key::path`, `key::pattern`, `key::header`, `key::from_fn`
//! and the combinators) and of how the Redis backend turns a name into keys:
//!
//! - no method, path (any string, percent-encodings valid or not, `..`, `//`, control bytes) or header
//!   value (any bytes, invalid UTF-8 included) makes an extractor panic: it yields names within
//!   `MAX_KEY_LEN`, or a `KeyError`, which the layer answers with 400;
//! - the path extractors map a path to one spelling per resource: every spelling of the same decoded
//!   segments gives the same name, different segments never do;
//! - on a real redis-server, two distinct names (or one name in two namespaces that spell the same
//!   text) never share a lock, while the same name is refused;
//! - every key the crate creates for a name (held, waited for, queued for fairly) starts with the
//!   hash tag `{<namespace>:<escaped name>}` and holds no other `{` or `}`: one cluster slot per lock,
//!   and no name can move the boundary between its namespace and itself;
//! - names longer than `MAX_KEY_LEN` are a `KeyError` (`LockError::InvalidKey`), never a panic.

mod support;

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use sha2::{Digest, Sha256};
use support::{RedisServer, Reply};
use tower::ServiceExt;
use tower_lock::key::{self, KeyExtractor, Keys, LockKey, RequestView, MAX_KEY_LEN};
use tower_lock::{KeyError, LockError, LockLayer, LockManager, LockOptions};

// ---------------------------------------------------------------------------------------------
// Reference rules, written from the documentation
// ---------------------------------------------------------------------------------------------

/// Bytes a canonical path segment keeps as they are (`key::pattern`'s docs: unreserved characters,
/// sub-delimiters, `:` and `@`).
fn is_plain(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || b"-._~!$&'()*+,;=:@".contains(&byte)
}

fn hex(byte: u8) -> Option<u8> {
    char::from(byte).to_digit(16).map(|d| d as u8)
}

/// The bytes a raw path segment stands for: `%XX` decoded, anything else (a stray `%` included) as is.
fn decode_segment(raw: &str) -> Vec<u8> {
    let bytes = raw.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            if let (Some(hi), Some(lo)) = (
                bytes.get(i + 1).copied().and_then(hex),
                bytes.get(i + 2).copied().and_then(hex),
            ) {
                out.push(hi << 4 | lo);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    out
}

/// The one spelling of a decoded segment: plain bytes as they are, every other byte `%XX` (upper case).
fn spell(decoded: &[u8]) -> String {
    let mut out = String::new();
    for &byte in decoded {
        if is_plain(byte) {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// The decoded, non-empty segments of a path.
fn decoded_segments(path: &str) -> Vec<Vec<u8>> {
    path.split('/')
        .filter(|s| !s.is_empty())
        .map(decode_segment)
        .collect()
}

/// The README's escaping of a lock name in a Redis key: `{`, `}`, `:`, `%`, `#`, spaces and control
/// bytes become `%XX`; a name longer than 200 bytes once escaped is stored under its SHA-256.
fn readme_escape(name: &str) -> String {
    let mut out = String::new();
    for c in name.chars() {
        match c {
            '{' | '}' | ':' | '%' | '#' | ' ' | '\u{0}'..='\u{1f}' | '\u{7f}' => {
                out.push_str(&format!("%{:02X}", c as u32));
            }
            c => out.push(c),
        }
    }
    if out.len() > 200 {
        out = sha_name(name);
    }
    out
}

/// `#` and the hex SHA-256 of `name`: how an over-long name is stored.
fn sha_name(name: &str) -> String {
    let mut out = String::from("#");
    for byte in Sha256::digest(name.as_bytes()) {
        out.push_str(&format!("{byte:02x}"));
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Requests of any shape
// ---------------------------------------------------------------------------------------------

/// A request that holds whatever the strategy made: any method string, any path string, any header
/// bytes. (An `http::Request` cannot carry most of these; a web stack's `RequestView` might.)
#[derive(Debug, Clone)]
struct RawRequest {
    method: String,
    path: String,
    header: Option<Vec<u8>>,
}

impl RequestView for RawRequest {
    fn method(&self) -> &str {
        &self.method
    }

    fn path(&self) -> &str {
        &self.path
    }

    fn header(&self, name: &str) -> Option<&[u8]> {
        if name.eq_ignore_ascii_case("x-id") {
            self.header.as_deref()
        } else {
            None
        }
    }

    fn visit_extensions(&self, _visit: &mut dyn FnMut(&dyn std::any::Any)) {}
}

/// Pieces that hostile paths are made of.
const PATH_PIECES: &[&str] = &[
    "/", "/", "//", "/", "..", ".", "%", "%2", "%2F", "%2f", "%2E%2E", "%25", "%zz", "%4", "%41",
    "%C3%A9", "%ff", "%00", "%0A", "accounts", "Accounts", "42", "4%32", "{id}", "{", "}", ":",
    "#", "?", "@", "+", " ", "\t", "\0", "\n", "\u{7f}", "\u{85}", "é", "ключ", "✓", "a", "B",
];

fn hostile_path() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => prop::collection::vec(prop::sample::select(PATH_PIECES), 0..24)
            .prop_map(|pieces| pieces.concat()),
        2 => any::<String>(),
        1 => "(/[a-z%0-9.]{0,3}){0,8}",
        // long enough to pass MAX_KEY_LEN once escaped, or not
        1 => (prop::sample::select(&["a", "%", "é", "/x", "%41", "\0"][..]), 600..2100usize)
            .prop_map(|(piece, n)| format!("/{}", piece.repeat(n))),
    ]
}

fn hostile_method() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(
            &["GET", "PUT", "post", "DELETE", "PATCH", "", " ", "G\0T", "ÜBER"][..]
        )
        .prop_map(str::to_owned),
        any::<String>(),
    ]
}

fn hostile_header() -> impl Strategy<Value = Option<Vec<u8>>> {
    prop::option::weighted(
        0.9,
        prop_oneof![
            any::<Vec<u8>>(),
            any::<String>().prop_map(String::into_bytes),
            prop::sample::select(&[" ", "", "\t", " acme ", "\u{a0}x\u{a0}", "a:b", "{x}"][..])
                .prop_map(|s| s.as_bytes().to_vec()),
            (
                prop::sample::select(vec![b"x".to_vec(), vec![0xff], "é".as_bytes().to_vec()]),
                MAX_KEY_LEN - 4..MAX_KEY_LEN + 4
            )
                .prop_map(|(unit, n)| unit.repeat(n / unit.len())),
        ],
    )
}

fn runner(cases: u32) -> TestRunner {
    TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    })
}

/// Run `test` on `cases` values of `strategy`; panic with the (shrunk) failing value.
fn check<S: Strategy>(cases: u32, strategy: S, test: impl Fn(S::Value) -> Result<(), TestCaseError>)
where
    S::Value: std::fmt::Debug,
{
    if let Err(err) = runner(cases).run(&strategy, test) {
        panic!("{err}");
    }
}

fn names(keys: &Keys) -> Vec<String> {
    keys.iter().map(LockKey::to_string).collect()
}

/// Every name an extractor yields is a valid lock name.
fn valid(result: &Result<Keys, KeyError>) -> Result<(), TestCaseError> {
    if let Ok(keys) = result {
        for key in keys.iter() {
            prop_assert!(!key.as_str().is_empty());
            prop_assert!(key.as_str().len() <= MAX_KEY_LEN);
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Extractors
// ---------------------------------------------------------------------------------------------

/// No request makes any extractor panic; each one yields valid names or a `KeyError`, exactly as its
/// documentation says.
#[test]
fn extractors_never_panic_and_follow_their_rules() {
    let strategy = (
        hostile_method(),
        hostile_path(),
        hostile_header(),
        hostile_path(),
    );
    check(1024, strategy, |(method, path, header, pattern)| {
        let req = RawRequest {
            method,
            path,
            header,
        };
        let view: &dyn RequestView = &req;

        // key::path(): "/" + the canonical segments, or TooLong
        let segments = decoded_segments(&req.path);
        let mut expected = String::new();
        for segment in &segments {
            expected.push('/');
            expected.push_str(&spell(segment));
        }
        if expected.is_empty() {
            expected.push('/');
        }
        let got = key::path().extract(view);
        valid(&got)?;
        if expected.len() > MAX_KEY_LEN {
            prop_assert_eq!(
                got,
                Err(KeyError::TooLong {
                    len: expected.len(),
                    max: MAX_KEY_LEN
                })
            );
        } else {
            let got = got.map(|keys| names(&keys));
            prop_assert_eq!(got, Ok(vec![expected.clone()]));
            // the canonical name is a fixpoint, and decodes back to exactly the request's segments:
            // two requests share a name only when they name the same segments
            let again = key::path().extract(&RawRequest {
                path: expected.clone(),
                ..req.clone()
            });
            prop_assert_eq!(again.map(|k| names(&k)), Ok(vec![expected.clone()]));
            prop_assert_eq!(decoded_segments(&expected), segments.clone());
        }

        // key::pattern("/accounts/{id}"): the first two segments when the first is `accounts`;
        // segments are counted as the path spells them (after one leading `/`), and an empty one
        // (`//`) matches nothing: rejected by default, passed (and marked unmatched) when optional
        let accounts = key::pattern("/accounts/{id}");
        let got = accounts.extract(view);
        valid(&got)?;
        let optional = accounts.clone().optional().extract(view);
        valid(&optional)?;
        let path = &req.path;
        let raw: Vec<Vec<u8>> = (path.strip_prefix('/').unwrap_or(path).split('/'))
            .map(decode_segment)
            .collect();
        let want = match raw.as_slice() {
            [first, id, ..] if !id.is_empty() && spell(first) == "accounts" => {
                Some(format!("accounts/{}", spell(id)))
            }
            _ => None,
        };
        match want {
            Some(name) if name.len() > MAX_KEY_LEN => {
                prop_assert!(matches!(got, Err(KeyError::TooLong { .. })), "{:?}", got);
                prop_assert_eq!(optional, got);
            }
            Some(name) => {
                prop_assert_eq!(got.map(|k| names(&k)), Ok(vec![name]));
                prop_assert_eq!(optional.map(|k| k.unmatched_by().is_none()), Ok(true));
            }
            None => {
                prop_assert!(matches!(got, Err(KeyError::Extract(_))), "{:?}", got);
                let passed = optional.map(|k| (names(&k), k.unmatched_by().is_some()));
                prop_assert_eq!(passed, Ok((vec![], true)));
            }
        }

        // a pattern made of hostile text never panics either: refused when it is built, or
        // matching or not
        if let Ok(hostile) = key::try_pattern(&pattern) {
            valid(&hostile.extract(view))?;
            let _ = hostile.name_for(&req.path);
            let _ = hostile.name_for(&pattern);
            let _ = hostile.name_with(&[("id", req.path.as_str())]);
        }

        // key::header: the trimmed UTF-8 value; missing is refused unless optional, non-UTF-8
        // and blank are refused
        let header = key::header("x-id");
        let got = header.extract(view);
        valid(&got)?;
        let optional = key::header("x-id").optional().extract(view);
        valid(&optional)?;
        // header names are case-insensitive
        let upper = key::header("X-Id").extract(view);
        prop_assert_eq!(upper.ok(), got.clone().ok());
        match req.header.as_deref().map(std::str::from_utf8) {
            None => {
                prop_assert!(matches!(got, Err(KeyError::Extract(_))), "{:?}", got);
                let passed = optional.map(|k| (names(&k), k.unmatched_by().is_some()));
                prop_assert_eq!(passed, Ok((vec![], true)));
            }
            Some(Err(_)) => {
                prop_assert!(matches!(got, Err(KeyError::Extract(_))), "{:?}", got);
                prop_assert_eq!(optional, got);
            }
            Some(Ok(text)) => {
                let trimmed = text.trim();
                if trimmed.is_empty() {
                    prop_assert!(matches!(got, Err(KeyError::Extract(_))), "{:?}", got);
                } else if trimmed.len() > MAX_KEY_LEN {
                    prop_assert_eq!(
                        got.clone(),
                        Err(KeyError::TooLong {
                            len: trimmed.len(),
                            max: MAX_KEY_LEN
                        })
                    );
                } else {
                    prop_assert_eq!(got.clone().map(|k| names(&k)), Ok(vec![trimmed.to_owned()]));
                }
                prop_assert_eq!(optional, got);
            }
        }

        // the combinators and from_fn: never a panic, only valid names
        let combined = key::path()
            .prefix("path:")
            .and(key::header("x-id").optional().prefix("{tenant}:"))
            .and(key::from_fn(|req: &dyn RequestView| {
                req.header_str("x-id")
                    .map(|v| format!("{}{v}", req.method()))
            }))
            .skip_methods([req.method.as_str(), "GET"]);
        let got = combined.extract(view);
        valid(&got)?;
        // listed methods are compared upper case; a request's method as sent (methods are
        // case-sensitive: `post` is not `POST`)
        if req.method == req.method.to_ascii_uppercase() {
            prop_assert_eq!(got.map(|k| k.is_empty()), Ok(true), "the method is skipped");
        }
        let only = key::from_fn(|req: &dyn RequestView| {
            vec![req.path().to_owned(), req.method().to_owned()]
        })
        .and(key::path().prefix(pattern.clone()))
        .only_methods([req.method.to_ascii_uppercase()]);
        let got = only.extract(view);
        valid(&got)?;
        if let Ok(keys) = got {
            let _ = keys.into_sorted();
        }
        Ok(())
    });
}

/// The same holds for real `http` 1.x requests: any URI that parses, any method token, any header
/// bytes `HeaderValue` accepts (invalid UTF-8 included).
#[test]
fn http_requests_of_any_shape_never_panic() {
    let strategy = (
        hostile_method(),
        hostile_path(),
        prop::option::of(any::<Vec<u8>>()),
    );
    check(1024, strategy, |(method, path, header)| {
        let mut builder = http::Request::builder();
        if let Ok(method) = http::Method::from_bytes(method.as_bytes()) {
            builder = builder.method(method);
        }
        if let Ok(uri) = http::Uri::try_from(path.as_str()) {
            builder = builder.uri(uri);
        }
        let mut bytes = None;
        if let Some(value) = header.and_then(|h| http::HeaderValue::from_bytes(&h).ok()) {
            bytes = Some(value.as_bytes().to_vec());
            builder = builder.header("x-id", value);
        }
        let Ok(req) = builder.body(()) else {
            return Ok(());
        };
        let raw = RawRequest {
            method: req.method().as_str().to_owned(),
            path: req.uri().path().to_owned(),
            header: bytes,
        };
        let extractor = key::path()
            .and(key::pattern("/accounts/{id}").optional().prefix("a:"))
            .and(key::header("x-id").optional().prefix("h:"));
        let from_http = extractor.extract(&req);
        valid(&from_http)?;
        prop_assert_eq!(
            from_http,
            extractor.extract(&raw),
            "the same as its plain view"
        );
        Ok(())
    });
}

/// Two spellings of the same segments lock the same name; two different segment lists never do.
#[test]
fn every_spelling_of_a_path_names_one_resource() {
    // segments as bytes, each byte spelled plainly or as %xx/%XX at random
    let segment = prop::collection::vec((any::<u8>(), any::<bool>(), any::<bool>()), 1..6);
    let strategy = (
        prop::collection::vec((segment.clone(), 1..3usize), 1..5),
        prop::collection::vec((segment, 1..3usize), 1..5),
    );
    /// A segment's bytes, each with (spell it `%XX`, in lower case), and the slashes before it.
    type Spelling = (Vec<(u8, bool, bool)>, usize);
    fn spelled(segments: &[Spelling]) -> (Vec<Vec<u8>>, String) {
        let mut decoded = Vec::new();
        let mut path = String::new();
        for (bytes, slashes) in segments {
            path.push_str(&"/".repeat(*slashes));
            let mut seg = Vec::new();
            for &(byte, escape, lower) in bytes {
                // what is not plain must be escaped to stand for itself in a URI
                if escape || !is_plain(byte) {
                    let text = format!("%{byte:02X}");
                    path.push_str(&if lower { text.to_lowercase() } else { text });
                } else {
                    path.push(char::from(byte));
                }
                seg.push(byte);
            }
            decoded.push(seg);
        }
        (decoded, path)
    }
    check(512, strategy, |(a, b)| {
        let (a_segments, a_path) = spelled(&a);
        let (b_segments, b_path) = spelled(&b);
        let name = |path: &str| -> Result<String, TestCaseError> {
            let req = http::Request::get(path)
                .body(())
                .map_err(|e| TestCaseError::fail(format!("{path:?}: {e}")))?;
            let keys = key::path()
                .extract(&req)
                .map_err(|e| TestCaseError::fail(format!("{path:?}: {e}")))?;
            Ok(names(&keys).concat())
        };
        let (a_name, b_name) = (name(&a_path)?, name(&b_path)?);
        prop_assert_eq!(decoded_segments(&a_name), a_segments.clone());
        prop_assert_eq!(
            a_segments == b_segments,
            a_name == b_name,
            "{} {} -> {} {}",
            a_path,
            b_path,
            a_name,
            b_name
        );
        Ok(())
    });
}

/// Names past `MAX_KEY_LEN` bytes are a `KeyError` everywhere, never a panic; names up to it are
/// accepted.
#[test]
fn overlong_names_are_a_key_error() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let manager = LockManager::memory();
    let unit = prop::sample::select(&["x", "é", "ключ", "{", "%", "\0", "✓"][..]);
    let len = prop_oneof![1..MAX_KEY_LEN + 64, MAX_KEY_LEN - 8..MAX_KEY_LEN + 8];
    check(256, (unit, len), |(unit, n)| {
        let name = unit.repeat(n / unit.len());
        let len = name.len();
        if len == 0 {
            return Ok(());
        }
        let too_long = KeyError::TooLong {
            len,
            max: MAX_KEY_LEN,
        };
        let key = LockKey::new(name.clone());
        let from_fn = key::from_fn({
            let name = name.clone();
            move |_req: &dyn RequestView| name.clone()
        })
        .extract(&http::Request::new(()));
        let acquired = rt.block_on(manager.try_acquire(&name, &LockOptions::exclusive()));
        if len > MAX_KEY_LEN {
            prop_assert_eq!(key, Err(too_long.clone()));
            prop_assert_eq!(from_fn, Err(too_long.clone()));
            prop_assert!(
                matches!(&acquired, Err(LockError::InvalidKey(e)) if *e == too_long),
                "{:?}",
                acquired.map(|g| g.is_some())
            );
        } else {
            prop_assert_eq!(key.map(|k| k.to_string()), Ok(name.clone()));
            prop_assert_eq!(from_fn.map(|k| names(&k)), Ok(vec![name.clone()]));
            let guard = acquired.map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert!(guard.is_some());
        }
        Ok(())
    });
    // a prefix that pushes a name past the limit
    let req = http::Request::get("/")
        .header("x-id", "x".repeat(MAX_KEY_LEN))
        .body(())
        .expect("request");
    assert_eq!(
        key::header("x-id").prefix("p").extract(&req),
        Err(KeyError::TooLong {
            len: MAX_KEY_LEN + 1,
            max: MAX_KEY_LEN
        })
    );
}

// ---------------------------------------------------------------------------------------------
// Through the layer
// ---------------------------------------------------------------------------------------------

/// Whatever the extractor makes of a request, the layer answers it: 400 for a `KeyError`, the
/// handler's 200 otherwise; never a panic.
#[test]
fn the_layer_answers_a_key_error_with_400() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let manager = LockManager::memory();
    let layer = LockLayer::new(
        manager,
        key::header("x-id").required().and(key::path().prefix("p")),
    )
    .wait_timeout(Duration::from_secs(5));
    let service = tower::ServiceBuilder::new()
        .layer(layer.clone())
        .service(tower::service_fn(|_req: http::Request<String>| async {
            Ok::<_, std::convert::Infallible>(http::Response::new(String::from("ok")))
        }));

    // invalid UTF-8 in the header; an over-long path
    for (path, value) in [
        ("/a", &b"\xff\xfe"[..]),
        ("/a", &b"   "[..]),
        (
            &*format!("/{}", "%e9".repeat(MAX_KEY_LEN / 3 + 1)),
            &b"ok"[..],
        ),
    ] {
        let req = http::Request::put(path)
            .header("x-id", http::HeaderValue::from_bytes(value).expect("value"))
            .body(String::new())
            .expect("request");
        let response = rt
            .block_on(service.clone().oneshot(req))
            .expect("infallible");
        assert_eq!(response.status(), 400, "{path:.20} {value:?}");
    }

    let strategy = (hostile_path(), hostile_header());
    check(256, strategy, |(path, header)| {
        let mut builder = http::Request::post("/");
        if let Ok(uri) = http::Uri::try_from(path.as_str()) {
            builder = builder.uri(uri);
        }
        if let Some(value) = header.and_then(|h| http::HeaderValue::from_bytes(&h).ok()) {
            builder = builder.header("x-id", value);
        }
        let Ok(req) = builder.body(String::new()) else {
            return Ok(());
        };
        let expected = key::header("x-id")
            .required()
            .and(key::path().prefix("p"))
            .extract(&req);
        let response = rt
            .block_on(service.clone().oneshot(req))
            .map_err(|e| TestCaseError::fail(format!("{e:?}")))?;
        match expected {
            Err(_) => prop_assert_eq!(response.status(), 400),
            Ok(_) => prop_assert_eq!(response.status(), 200),
        }
        Ok(())
    });
}

// ---------------------------------------------------------------------------------------------
// On Redis
// ---------------------------------------------------------------------------------------------

/// Pieces of hostile lock names.
const NAME_PIECES: &[&str] = &[
    "a", "A", "k", "{", "}", "{}", ":", "::", "%", "%3A", "%7B", "%25", "#", "#ab", " ", "\t",
    "\0", "\n", "\u{7f}", "\u{85}", "é", "ключ", "✓", "/", "..", "|", "*", "?", "[", "]", "\\",
];

fn hostile_name() -> impl Strategy<Value = String> {
    prop_oneof![
        6 => prop::collection::vec(prop::sample::select(NAME_PIECES), 1..12)
            .prop_map(|pieces| pieces.concat()),
        2 => "\\PC{1,40}",
        1 => any::<String>().prop_filter("non-empty", |s| !s.is_empty()),
        // around the hash limit (200 escaped bytes), and up to MAX_KEY_LEN
        2 => (prop::sample::select(&["k", ":", "é", "{}"][..]), 60..230usize)
            .prop_map(|(piece, n)| piece.repeat(n)),
        1 => (prop::sample::select(&["k", "%", "ключ"][..]), 900..MAX_KEY_LEN)
            .prop_map(|(piece, n)| piece.repeat(n / piece.len())),
    ]
}

/// `name` changed by one hostile edit: a brace, colon, `%` or `#` put in or swapped in, the case of
/// one letter flipped, one character more or less, its escaped or hashed spelling.
fn neighbour(name: String) -> impl Strategy<Value = (String, String)> {
    let len = name.chars().count();
    (
        0..=len,
        prop::sample::select(&['{', '}', ':', '%', '#', ' ', 'k', 'K'][..]),
        0..7u8,
    )
        .prop_map(move |(at, c, edit)| {
            let mut chars: Vec<char> = name.chars().collect();
            let other = match edit {
                0 => {
                    chars.insert(at, c);
                    chars.into_iter().collect()
                }
                1 if at < chars.len() => {
                    chars[at] = c;
                    chars.into_iter().collect()
                }
                2 => match chars.iter().position(|c| c.is_ascii_alphabetic()) {
                    Some(i) => {
                        chars[i] = if chars[i].is_ascii_uppercase() {
                            chars[i].to_ascii_lowercase()
                        } else {
                            chars[i].to_ascii_uppercase()
                        };
                        chars.into_iter().collect()
                    }
                    None => format!("{name}A"),
                },
                3 if chars.len() > 1 => {
                    chars.pop();
                    chars.into_iter().collect()
                }
                4 => readme_escape(&name),
                5 => sha_name(&name),
                _ => format!("{name}{c}"),
            };
            (name.clone(), other)
        })
}

fn name_pair() -> impl Strategy<Value = (String, String)> {
    prop_oneof![
        (hostile_name(), hostile_name()),
        hostile_name().prop_flat_map(neighbour),
    ]
    .prop_filter("distinct, at most MAX_KEY_LEN", |(a, b)| {
        a != b && a.len() <= MAX_KEY_LEN && b.len() <= MAX_KEY_LEN
    })
}

/// One redis-server and a runtime for a whole property.
struct RedisProperty {
    rt: tokio::runtime::Runtime,
    server: RedisServer,
    namespaces: AtomicU64,
}

impl RedisProperty {
    fn start() -> Self {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime");
        RedisProperty {
            rt,
            server: RedisServer::start(),
            namespaces: AtomicU64::new(0),
        }
    }

    /// A namespace no other case uses.
    fn fresh_namespace(&self, tag: &str) -> String {
        format!("{tag}-{}", self.namespaces.fetch_add(1, Ordering::Relaxed))
    }

    async fn manager(&self, namespace: &str) -> Result<LockManager, TestCaseError> {
        LockManager::builder()
            .namespace(namespace)
            .redis(self.server.url())
            .build()
            .await
            .map_err(|e| TestCaseError::fail(format!("manager for {namespace:?}: {e}")))
    }

    /// Every key in the server (SCAN, so it works whatever the count).
    fn keys(&self) -> Vec<Vec<u8>> {
        let mut cursor = String::from("0");
        let mut keys = Vec::new();
        loop {
            let reply = self.server.cmd(&["SCAN", &cursor, "COUNT", "1000"]);
            let Some([next, Reply::Array(Some(batch))]) = reply.as_array() else {
                panic!("unexpected SCAN reply {reply:?}");
            };
            keys.extend(batch.iter().map(|k| k.as_bytes().expect("key").to_vec()));
            cursor = next.as_string().expect("cursor");
            if cursor == "0" {
                return keys;
            }
        }
    }
}

fn fail(what: impl std::fmt::Display) -> TestCaseError {
    TestCaseError::fail(what.to_string())
}

/// Holding one name never holds another: on Redis (a namespace per case) and in memory, for two
/// distinct names of any content, holding one, a `try_acquire` of the other succeeds while one of
/// the same name is refused.
#[test]
fn distinct_names_never_share_a_lock() {
    let redis = RedisProperty::start();
    let memory = LockManager::memory();
    let opts = LockOptions::exclusive();
    check(256, name_pair(), |(a, b)| {
        redis.rt.block_on(async {
            let namespace = redis.fresh_namespace("distinct");
            for manager in [redis.manager(&namespace).await?, memory.clone()] {
                let (first, second) = (manager.owner(), manager.owner());
                let held_a = first.try_acquire(&a, &opts).await.map_err(fail)?;
                prop_assert!(held_a.is_some(), "{} is free", a.len());
                let held_b = second.try_acquire(&b, &opts).await.map_err(fail)?;
                prop_assert!(held_b.is_some(), "holding {:?} held {:?}", a, b);
                prop_assert!(second.try_acquire(&a, &opts).await.map_err(fail)?.is_none());
                prop_assert!(first.try_acquire(&b, &opts).await.map_err(fail)?.is_none());
                prop_assert!(manager
                    .try_acquire(&a, &opts)
                    .await
                    .map_err(fail)?
                    .is_none());
                for guard in [held_a, held_b].into_iter().flatten() {
                    guard.release().await.map_err(fail)?;
                }
            }
            Ok(())
        })
    });
}

/// Namespace and name cannot be traded for each other: `ns = "a"` with name `"b:c"` and
/// `ns = "a:b"` with name `"c"` (and any other split of the same text, or any two namespaces) are
/// different locks in different cluster slots; every key has one hash tag.
#[test]
fn a_name_cannot_forge_another_namespace() {
    let redis = RedisProperty::start();
    let opts = LockOptions::exclusive();
    let piece =
        || prop::collection::vec(prop::sample::select(NAME_PIECES), 1..5).prop_map(|p| p.concat());
    let strategy = prop_oneof![
        // one text, split in two places
        (piece(), piece(), piece())
            .prop_map(|(x, y, z)| { ((x.clone(), format!("{y}:{z}")), (format!("{x}:{y}"), z)) }),
        ((piece(), hostile_name()), (piece(), hostile_name())),
    ]
    .prop_filter("distinct", |(p, q)| {
        p != q && p.1.len() <= MAX_KEY_LEN && q.1.len() <= MAX_KEY_LEN
    });
    let case = AtomicU64::new(0);
    check(128, strategy, |((ns_a, name_a), (ns_b, name_b))| {
        // a prefix per case keeps the cases apart; what follows it is the hostile namespace
        let n = case.fetch_add(1, Ordering::Relaxed);
        let (ns_a, ns_b) = (format!("f{n}/{ns_a}"), format!("f{n}/{ns_b}"));
        redis.server.cmd(&["FLUSHALL"]);
        redis.rt.block_on(async {
            let (m_a, m_b) = (redis.manager(&ns_a).await?, redis.manager(&ns_b).await?);
            let held_a = m_a.try_acquire(&name_a, &opts).await.map_err(fail)?;
            prop_assert!(held_a.is_some());
            let held_b = m_b.try_acquire(&name_b, &opts).await.map_err(fail)?;
            prop_assert!(
                held_b.is_some(),
                "{:?} in {:?} took {:?} in {:?}",
                name_a,
                ns_a,
                name_b,
                ns_b
            );

            let mut tags = std::collections::BTreeSet::new();
            for key in redis.keys() {
                let text = String::from_utf8_lossy(&key).into_owned();
                let tag = one_hash_tag(&text)?;
                // the name is the part after the namespace's `:`, escaped: nothing in it is a `:`,
                // so the boundary cannot move
                prop_assert_eq!(tag.matches(':').count(), 1, "{}", text);
                tags.insert(tag.to_owned());
            }
            // two locks, two slots, each tag ending in its escaped name
            prop_assert_eq!(tags.len(), 2, "{:?}", tags);
            let ends = |name: &str| {
                tags.iter()
                    .any(|t| t.ends_with(&format!(":{}", readme_escape(name))))
            };
            prop_assert!(ends(&name_a) && ends(&name_b), "{:?}", tags);
            for guard in [held_a, held_b].into_iter().flatten() {
                guard.release().await.map_err(fail)?;
            }
            Ok(())
        })
    });
}

/// The hash tag of `key`: it starts with `{`, and holds exactly one `{` and one `}`.
fn one_hash_tag(key: &str) -> Result<&str, TestCaseError> {
    prop_assert!(key.starts_with('{'), "{:?} has no hash tag first", key);
    prop_assert_eq!(key.matches('{').count(), 1, "{:?}", key);
    prop_assert_eq!(key.matches('}').count(), 1, "{:?}", key);
    let end = key.find('}').unwrap_or(0);
    Ok(&key[1..end])
}

/// A task that ends with the case, even a failed one (so it cannot take a lock in the next case).
struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Every key the crate creates for a lock — its hash, its fencing counter, its waiters, its fair
/// queue and heartbeats — starts with `{<namespace>:<escaped name>}` (the README's escaping) and
/// holds no other brace: one slot per lock, inside its namespace.
#[test]
fn every_redis_key_is_namespaced() {
    let redis = RedisProperty::start();
    check(96, hostile_name(), |name| {
        let namespace = redis.fresh_namespace("keys");
        let lock = format!("{{{namespace}:{}}}", readme_escape(&name));
        redis.server.cmd(&["FLUSHALL"]);
        redis.rt.block_on(async {
            let manager = redis.manager(&namespace).await?;
            let other = redis.manager(&namespace).await?;
            for (mode, opts, waited_key) in [
                ("exclusive", LockOptions::exclusive(), format!("{lock}:w")),
                ("fair", LockOptions::fair(), format!("{lock}:ql")),
            ] {
                let opts = opts.wait_timeout(Duration::from_secs(10));
                let holder = manager.acquire(&name, &opts).await.map_err(fail)?;
                let mut waiter = AbortOnDrop({
                    let (other, name) = (other.clone(), name.clone());
                    tokio::spawn(async move { other.acquire(&name, &opts).await })
                });
                // the waiter has registered in Redis
                let registered = support::wait_until(Duration::from_secs(2), || {
                    redis.server.cmd(&["EXISTS", &waited_key]).as_int() == Some(1)
                });
                prop_assert!(
                    registered,
                    "{}: no {:?} in {:?}",
                    mode,
                    waited_key,
                    redis.keys()
                );
                // the lock and the waiting record at least (the fencing counter is written only
                // after a hold shorter than a block's width of 64 µs)
                let keys = redis.keys();
                prop_assert!(keys.len() >= 2, "{}: {:?}", mode, keys);
                for key in &keys {
                    let text = String::from_utf8_lossy(key);
                    prop_assert!(
                        text.starts_with(&lock),
                        "{}: {:?} is not under {:?}",
                        mode,
                        text,
                        lock
                    );
                    let tag = one_hash_tag(&text)?;
                    let prefix = format!("{namespace}:");
                    prop_assert!(tag.starts_with(&prefix), "{:?}", text);
                    let suffix = &text[lock.len()..];
                    let known = ["", ":f", ":w", ":ql"].contains(&suffix)
                        || (mode == "fair" && suffix.starts_with(":hb:"));
                    prop_assert!(known, "{}: unexpected key {:?}", mode, text);
                }
                holder.release().await.map_err(fail)?;
                let next = (&mut waiter.0).await.map_err(fail)?.map_err(fail)?;
                next.release().await.map_err(fail)?;
            }
            Ok(())
        })
    });
}
