//! A tiny blocking RESP2 client: enough to send one command and read its reply.

use std::io::{self, BufRead, BufReader, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::time::Duration;

/// Connect timeout used by [`redis_cmd`].
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// Read/write timeout used by [`redis_cmd`].
const IO_TIMEOUT: Duration = Duration::from_secs(5);

/// A decoded RESP2 reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// Simple string (`+OK`).
    Status(String),
    /// Error reply (`-ERR ...`), without the leading `-`.
    Error(String),
    /// Integer reply (`:1`).
    Int(i64),
    /// Bulk string; `None` is the nil bulk (`$-1`).
    Bulk(Option<Vec<u8>>),
    /// Array; `None` is the nil array (`*-1`).
    Array(Option<Vec<Reply>>),
}

impl Reply {
    /// The integer value: an `Int`, or a `Status`/`Bulk` whose text parses as `i64`.
    pub fn as_int(&self) -> Option<i64> {
        match self {
            Reply::Int(i) => Some(*i),
            Reply::Status(s) => s.trim().parse().ok(),
            Reply::Bulk(Some(b)) => std::str::from_utf8(b).ok()?.trim().parse().ok(),
            _ => None,
        }
    }

    /// The text of a `Status` or non-nil `Bulk` (lossy UTF-8); `None` otherwise.
    pub fn as_string(&self) -> Option<String> {
        match self {
            Reply::Status(s) => Some(s.clone()),
            Reply::Bulk(Some(b)) => Some(String::from_utf8_lossy(b).into_owned()),
            _ => None,
        }
    }

    /// The raw bytes of a non-nil `Bulk` or a `Status`; `None` otherwise.
    pub fn as_bytes(&self) -> Option<&[u8]> {
        match self {
            Reply::Status(s) => Some(s.as_bytes()),
            Reply::Bulk(Some(b)) => Some(b),
            _ => None,
        }
    }

    /// The elements of a non-nil `Array`; `None` otherwise.
    pub fn as_array(&self) -> Option<&[Reply]> {
        match self {
            Reply::Array(Some(items)) => Some(items),
            _ => None,
        }
    }

    /// The elements of an array converted with [`Reply::as_string`]
    /// (`None` if this is not an array or some element is not a string).
    pub fn as_strings(&self) -> Option<Vec<String>> {
        self.as_array()?.iter().map(Reply::as_string).collect()
    }

    /// The message of an `Error` reply; `None` otherwise.
    pub fn error_message(&self) -> Option<&str> {
        match self {
            Reply::Error(e) => Some(e),
            _ => None,
        }
    }

    /// True for an `Error` reply.
    pub fn is_error(&self) -> bool {
        matches!(self, Reply::Error(_))
    }

    /// True for the nil bulk string or the nil array.
    pub fn is_nil(&self) -> bool {
        matches!(self, Reply::Bulk(None) | Reply::Array(None))
    }

    /// True for the status reply `OK`.
    pub fn is_ok(&self) -> bool {
        matches!(self, Reply::Status(s) if s == "OK")
    }
}

/// Encodes one command as a RESP2 array of bulk strings.
fn encode_command(args: &[&[u8]]) -> Vec<u8> {
    let mut out = Vec::with_capacity(16 + args.iter().map(|a| a.len() + 16).sum::<usize>());
    out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
    for arg in args {
        out.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
        out.extend_from_slice(arg);
        out.extend_from_slice(b"\r\n");
    }
    out
}

fn invalid(msg: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg.into())
}

/// Reads one CRLF-terminated line, without the CRLF.
fn read_line<R: BufRead>(r: &mut R) -> io::Result<String> {
    let mut buf = Vec::new();
    let n = r.read_until(b'\n', &mut buf)?;
    if n == 0 {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "connection closed before a full reply was read",
        ));
    }
    if !buf.ends_with(b"\r\n") {
        return Err(invalid(format!(
            "RESP line not terminated by CRLF: {:?}",
            String::from_utf8_lossy(&buf)
        )));
    }
    buf.truncate(buf.len() - 2);
    String::from_utf8(buf).map_err(|e| invalid(format!("non-UTF-8 RESP line: {e}")))
}

fn parse_len(s: &str) -> io::Result<i64> {
    s.parse::<i64>()
        .map_err(|_| invalid(format!("bad RESP length/integer: {s:?}")))
}

/// Reads one RESP2 reply (recursively for arrays).
fn read_reply<R: BufRead>(r: &mut R) -> io::Result<Reply> {
    let line = read_line(r)?;
    let (kind, rest) = match line.chars().next() {
        Some(c) => (c, &line[c.len_utf8()..]),
        None => return Err(invalid("empty RESP line")),
    };
    match kind {
        '+' => Ok(Reply::Status(rest.to_string())),
        '-' => Ok(Reply::Error(rest.to_string())),
        ':' => Ok(Reply::Int(parse_len(rest)?)),
        '$' => {
            let len = parse_len(rest)?;
            if len < 0 {
                return Ok(Reply::Bulk(None));
            }
            let mut buf = vec![0u8; len as usize + 2];
            r.read_exact(&mut buf)?;
            if !buf.ends_with(b"\r\n") {
                return Err(invalid("bulk string not terminated by CRLF"));
            }
            buf.truncate(len as usize);
            Ok(Reply::Bulk(Some(buf)))
        }
        '*' => {
            let len = parse_len(rest)?;
            if len < 0 {
                return Ok(Reply::Array(None));
            }
            let mut items = Vec::with_capacity(len.min(1024) as usize);
            for _ in 0..len {
                items.push(read_reply(r)?);
            }
            Ok(Reply::Array(Some(items)))
        }
        other => Err(invalid(format!("unsupported RESP type byte {other:?}"))),
    }
}

pub(super) fn redis_cmd_with(
    port: u16,
    args: &[&[u8]],
    connect_timeout: Duration,
    io_timeout: Duration,
) -> io::Result<Reply> {
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let mut stream = TcpStream::connect_timeout(&addr, connect_timeout)?;
    stream.set_read_timeout(Some(io_timeout))?;
    stream.set_write_timeout(Some(io_timeout))?;
    stream.set_nodelay(true)?;
    stream.write_all(&encode_command(args))?;
    stream.flush()?;
    let mut reader = BufReader::new(stream);
    read_reply(&mut reader)
}

/// Sends one command to `127.0.0.1:port` over a fresh connection and reads the
/// reply (connect timeout 2 s, read/write timeout 5 s). Redis error replies are
/// `Ok(Reply::Error(..))`; only I/O and protocol failures are `Err`.
pub fn redis_cmd(port: u16, args: &[&str]) -> io::Result<Reply> {
    let raw: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
    redis_cmd_with(port, &raw, CONNECT_TIMEOUT, IO_TIMEOUT)
}

/// Like [`redis_cmd`] but with binary-safe arguments.
pub fn redis_cmd_bytes(port: u16, args: &[&[u8]]) -> io::Result<Reply> {
    redis_cmd_with(port, args, CONNECT_TIMEOUT, IO_TIMEOUT)
}
