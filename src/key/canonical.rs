//! One spelling per path segment, so that two spellings of the same resource (`42` and `4%32`) always
//! lock the same name, and two different resources never do.

/// Bytes kept as they are in a canonical segment: RFC 3986 unreserved characters, sub-delimiters,
/// `:` and `@` (everything a path segment may hold unescaped, except `%`).
fn is_plain(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || b"-._~!$&'()*+,;=:@".contains(&byte)
}

fn hex_value(byte: u8) -> Option<u8> {
    match byte {
        b'0'..=b'9' => Some(byte - b'0'),
        b'a'..=b'f' => Some(byte - b'a' + 10),
        b'A'..=b'F' => Some(byte - b'A' + 10),
        _ => None,
    }
}

/// Append the canonical form of the raw path segment `raw` to `out`: percent escapes are decoded,
/// then every byte that is not plain is escaped again as `%XX` (upper-case hex). The mapping from
/// decoded bytes to canonical text is one-to-one, so a decoded `/` (`%2F`) can never make one
/// segment look like two.
pub(crate) fn push_segment(raw: &str, out: &mut String) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    let bytes = raw.as_bytes();
    if bytes.iter().copied().all(is_plain) {
        out.push_str(raw);
        return;
    }
    let mut i = 0;
    while i < bytes.len() {
        let mut byte = bytes[i];
        i += 1;
        if byte == b'%' && i + 2 <= bytes.len() {
            if let (Some(hi), Some(lo)) = (hex_value(bytes[i]), hex_value(bytes[i + 1])) {
                byte = hi << 4 | lo;
                i += 2;
            }
        }
        if is_plain(byte) {
            out.push(char::from(byte));
        } else {
            out.push('%');
            out.push(char::from(HEX[usize::from(byte >> 4)]));
            out.push(char::from(HEX[usize::from(byte & 0xf)]));
        }
    }
}

/// Append the canonical form of a decoded value (a resource id as the application knows it, such
/// as `a/b` or `100%`) to `out`: every byte that is not plain is escaped as `%XX`, `%` included.
/// A request whose path carries `value` percent-encoded gets the same text from [`push_segment`].
pub(crate) fn push_value(value: &str, out: &mut String) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    for byte in value.bytes() {
        if is_plain(byte) {
            out.push(char::from(byte));
        } else {
            out.push('%');
            out.push(char::from(HEX[usize::from(byte >> 4)]));
            out.push(char::from(HEX[usize::from(byte & 0xf)]));
        }
    }
}

/// The non-empty segments of a path (`"/a//b/"` has two: `a` and `b`).
pub(crate) fn segments(path: &str) -> impl Iterator<Item = &str> {
    path.split('/').filter(|segment| !segment.is_empty())
}

/// Every segment of a path as sent, empty ones included, after its one leading `/`
/// (`"/a//b/"` has four: `a`, ``, `b` and ``), for matching that must see `//` as routers do.
pub(crate) fn raw_segments(path: &str) -> impl Iterator<Item = &str> {
    path.strip_prefix('/').unwrap_or(path).split('/')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn canonical(raw: &str) -> String {
        let mut out = String::new();
        push_segment(raw, &mut out);
        out
    }

    #[test]
    fn one_spelling_per_segment() {
        assert_eq!(canonical("42"), "42");
        assert_eq!(canonical("4%32"), "42");
        assert_eq!(canonical("a%2fb"), "a%2Fb");
        assert_eq!(canonical("a%2Fb"), "a%2Fb");
        assert_eq!(canonical("100%"), "100%25");
        assert_eq!(canonical("%zz"), "%25zz");
        assert_eq!(canonical("%25"), "%25");
        assert_eq!(canonical("caf\u{e9}"), "caf%C3%A9");
        assert_eq!(canonical("caf%C3%A9"), "caf%C3%A9");
        assert_eq!(canonical("a b"), "a%20b");
        assert_eq!(canonical("user@x:1"), "user@x:1");
    }

    #[test]
    fn a_decoded_value_gets_the_spelling_of_its_encoded_segment() {
        for value in [
            "42",
            "a/b",
            "100%",
            "4%32",
            "caf\u{e9}",
            "a b",
            "user@x:1",
            "{id}",
        ] {
            let mut encoded = String::new();
            for byte in value.bytes() {
                encoded.push_str(&format!("%{byte:02x}"));
            }
            let mut from_value = String::new();
            push_value(value, &mut from_value);
            assert_eq!(from_value, canonical(&encoded), "{value}");
        }
    }

    #[test]
    fn empty_segments_are_skipped() {
        assert_eq!(segments("//a//b/").collect::<Vec<_>>(), ["a", "b"]);
        assert_eq!(segments("/").count(), 0);
    }
}
