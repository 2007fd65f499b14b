//! Reading Redis's answers (RESP2) out of a link's read buffer. The commands a lock sends answer
//! with short values (`OK`, a number, a short string, the clock's two fields, a script's small
//! array), so a value is read whole or not at all: an incomplete one is read again from its
//! start once more bytes came. Error answers are rare, and go through redis-rs's parser, which
//! gives them their kinds (`NOSCRIPT`, `READONLY`, ...).

use redis::Value;

/// Why the bytes are not a Redis answer: the link cannot be trusted with another one.
#[derive(Debug)]
pub(super) struct Garbled(pub(super) String);

/// The first whole value in `bytes` and how many bytes it took, or `None` until more come.
pub(super) fn read_value(bytes: &[u8]) -> Result<Option<(Value, usize)>, Garbled> {
    let Some((line, rest)) = line(bytes) else {
        return Ok(None);
    };
    let header = line.len() + 2;
    let (kind, body) = line.split_first().ok_or_else(|| garbled(line))?;
    let value = match kind {
        b'+' if body == b"OK" => Value::Okay,
        b'+' => Value::SimpleString(text(body)?),
        b':' => Value::Int(number(body)?),
        b'-' => server_error(&bytes[..header])?,
        b'$' => {
            let Ok(len) = usize::try_from(number(body)?) else {
                return Ok(Some((Value::Nil, header)));
            };
            if rest.len() < len.saturating_add(2) {
                return Ok(None);
            }
            if &rest[len..len + 2] != b"\r\n" {
                return Err(garbled(&rest[..len + 2]));
            }
            return Ok(Some((
                Value::BulkString(rest[..len].to_vec()),
                header + len + 2,
            )));
        }
        b'*' => {
            let Ok(len) = usize::try_from(number(body)?) else {
                return Ok(Some((Value::Nil, header)));
            };
            return read_array(len, rest, header);
        }
        _ => return Err(garbled(line)),
    };
    Ok(Some((value, header)))
}

/// An array of `len` values in `rest`, after its header of `header` bytes.
fn read_array(len: usize, rest: &[u8], header: usize) -> Result<Option<(Value, usize)>, Garbled> {
    // at most one element per byte: a length no answer could fill is not trusted to size memory
    let mut items = Vec::with_capacity(len.min(rest.len()));
    let mut used = 0;
    for _ in 0..len {
        let Some((item, size)) = read_value(&rest[used..])? else {
            return Ok(None);
        };
        items.push(item);
        used += size;
    }
    Ok(Some((Value::Array(items), header + used)))
}

/// The line at the start of `bytes` (without its `\r\n`), and what follows it.
fn line(bytes: &[u8]) -> Option<(&[u8], &[u8])> {
    let end = bytes.windows(2).position(|pair| pair == b"\r\n")?;
    Some((&bytes[..end], &bytes[end + 2..]))
}

fn number(digits: &[u8]) -> Result<i64, Garbled> {
    (std::str::from_utf8(digits).ok())
        .and_then(|digits| digits.parse().ok())
        .ok_or_else(|| garbled(digits))
}

fn text(bytes: &[u8]) -> Result<String, Garbled> {
    String::from_utf8(bytes.to_vec()).map_err(|_| garbled(bytes))
}

/// An error answer (its whole line), as redis-rs reads it: a value that says its kind.
fn server_error(line: &[u8]) -> Result<Value, Garbled> {
    match redis::parse_redis_value(line) {
        Ok(value @ Value::ServerError(_)) => Ok(value),
        _ => Err(garbled(line)),
    }
}

fn garbled(bytes: &[u8]) -> Garbled {
    let shown = &bytes[..bytes.len().min(64)];
    Garbled(format!(
        "Redis sent what is not an answer: {:?}",
        String::from_utf8_lossy(shown)
    ))
}

#[cfg(test)]
mod tests {
    use super::read_value;
    use redis::{ErrorKind, ServerErrorKind, Value};

    fn whole(bytes: &[u8]) -> Value {
        let (value, used) = read_value(bytes).unwrap().expect("a whole value");
        assert_eq!(used, bytes.len(), "{value:?}");
        value
    }

    #[test]
    fn reads_each_kind_of_answer() {
        assert_eq!(whole(b"+OK\r\n"), Value::Okay);
        assert_eq!(whole(b"+QUEUED\r\n"), Value::SimpleString("QUEUED".into()));
        assert_eq!(whole(b":-42\r\n"), Value::Int(-42));
        assert_eq!(whole(b"$-1\r\n"), Value::Nil);
        assert_eq!(whole(b"*-1\r\n"), Value::Nil);
        assert_eq!(whole(b"$0\r\n\r\n"), Value::BulkString(vec![]));
        assert_eq!(
            whole(b"$4\r\na\r\nb\r\n"),
            Value::BulkString(b"a\r\nb".to_vec())
        );
        let time = whole(b"*2\r\n$10\r\n1764294400\r\n$6\r\n123456\r\n");
        let (secs, micros): (u64, u64) = redis::from_redis_value(time).unwrap();
        assert_eq!((secs, micros), (1_764_294_400, 123_456));
        let nested = whole(b"*2\r\n:1\r\n*1\r\n$1\r\nx\r\n");
        let expected = [
            Value::Int(1),
            Value::Array(vec![Value::BulkString(b"x".to_vec())]),
        ];
        assert_eq!(nested, Value::Array(expected.to_vec()));
    }

    #[test]
    fn an_error_answer_keeps_its_kind() {
        let value = whole(b"-NOSCRIPT No matching script. Please use EVAL.\r\n");
        let err = value.extract_error().expect_err("an error answer");
        assert_eq!(err.kind(), ErrorKind::Server(ServerErrorKind::NoScript));
        let value = whole(b"-READONLY You can't write against a read only replica.\r\n");
        let err = value.extract_error().expect_err("an error answer");
        assert_eq!(err.code(), Some("READONLY"));
    }

    #[test]
    fn a_value_cut_anywhere_waits_for_the_rest() {
        let answer = b"*3\r\n$3\r\nabc\r\n:7\r\n*2\r\n+OK\r\n$-1\r\n";
        for cut in 0..answer.len() {
            assert!(
                read_value(&answer[..cut]).unwrap().is_none(),
                "cut at {cut}"
            );
        }
        let mut two = answer.to_vec();
        two.extend_from_slice(b":1\r\n");
        let (_, used) = read_value(&two).unwrap().unwrap();
        assert_eq!(used, answer.len());
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        for garbage in [
            &b"?x\r\n"[..],
            b":12a\r\n",
            b"$3\r\nabcde\r\n",
            b"\r\n",
            b"+\xff\r\n",
        ] {
            assert!(read_value(garbage).is_err(), "{garbage:?}");
        }
        // a length no buffer holds waits for more, and reserves nothing for it
        assert!(read_value(b"*9223372036854775807\r\n").unwrap().is_none());
    }
}
