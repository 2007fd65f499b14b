//! What the request core reads and writes of gRPC: telling a gRPC request apart, the deadline in its
//! `grpc-timeout` header, and the trailers-only response that answers a rejected call (built by
//! tonic's `Status` with the feature `tonic`, by hand without it).

use std::time::Duration;

use bytes::Bytes;

/// A trailers-only gRPC response: HTTP 200, `grpc-status` `code` and `grpc-message` `message` in the
/// headers, no body; tonic's own, so it reads exactly as tonic's services answer.
#[cfg(feature = "tonic")]
pub(super) fn trailers_only(code: u8, message: &str) -> http::Response<Bytes> {
    tonic::Status::new(tonic::Code::from(i32::from(code)), message).into_http()
}

/// A trailers-only gRPC response: HTTP 200, `grpc-status` `code` and `grpc-message` `message` in the
/// headers, no body; written by hand, so the layer answers gRPC properly without tonic.
#[cfg(not(feature = "tonic"))]
pub(super) fn trailers_only(code: u8, message: &str) -> http::Response<Bytes> {
    use http::header::{HeaderValue, CONTENT_TYPE};

    let mut response = http::Response::new(Bytes::new());
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/grpc"));
    headers.insert("grpc-status", HeaderValue::from(u16::from(code)));
    if let Ok(value) = HeaderValue::from_str(&grpc_message(message)) {
        headers.insert("grpc-message", value);
    }
    response
}

/// gRPC messages are percent-encoded: everything outside printable ASCII, and `%` itself.
#[cfg(not(feature = "tonic"))]
fn grpc_message(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    for byte in message.bytes() {
        if (0x20..0x7f).contains(&byte) && byte != b'%' {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// True for gRPC requests (including gRPC-Web): their content type starts with `application/grpc`.
pub(crate) fn is_grpc(content_type: Option<&[u8]>) -> bool {
    content_type.is_some_and(|value| value.starts_with(b"application/grpc"))
}

/// The deadline a gRPC client sent in `grpc-timeout`: 1 to 8 digits and a unit (`H`, `M`, `S`, `m`,
/// `u`, `n`). `None` when absent or malformed.
pub(super) fn grpc_timeout(value: Option<&[u8]>) -> Option<Duration> {
    let value = value?;
    let (&unit, digits) = value.split_last()?;
    if digits.is_empty() || digits.len() > 8 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let amount: u64 = std::str::from_utf8(digits).ok()?.parse().ok()?;
    Some(match unit {
        b'H' => Duration::from_secs(amount * 3600),
        b'M' => Duration::from_secs(amount * 60),
        b'S' => Duration::from_secs(amount),
        b'm' => Duration::from_millis(amount),
        b'u' => Duration::from_micros(amount),
        b'n' => Duration::from_nanos(amount),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_grpc_timeouts() {
        assert_eq!(
            grpc_timeout(Some(b"100m")),
            Some(Duration::from_millis(100))
        );
        assert_eq!(grpc_timeout(Some(b"2S")), Some(Duration::from_secs(2)));
        assert_eq!(grpc_timeout(Some(b"1H")), Some(Duration::from_secs(3600)));
        assert_eq!(grpc_timeout(Some(b"5n")), Some(Duration::from_nanos(5)));
        assert_eq!(grpc_timeout(Some(b"123456789S")), None, "at most 8 digits");
        assert_eq!(grpc_timeout(Some(b"10x")), None);
        assert_eq!(grpc_timeout(Some(b"S")), None);
        assert_eq!(grpc_timeout(None), None);
    }
}
