//! Commands written straight into the bytes Redis reads (RESP), as they are built. A lock's
//! connection (`link/`) sends those bytes as they are; redis-rs's connections get the commands
//! back as [`Cmd`]s.
//!
//! A `Cmd` keeps its words in buffers of its own, and sending it writes them all again: on the
//! uncontended request, building and writing the plain path's four commands and the release's
//! script call cost the client more than Redis's answers (BENCHMARKS.md, "Uncontended acquire + release").

use std::io;

use redis::{Cmd, RedisWrite, ToRedisArgs};

/// One or more commands, each complete at every moment: a word added to the last command updates
/// its count of words in place.
#[derive(Debug, Clone, Default)]
pub(crate) struct Packed {
    bytes: Vec<u8>,
    commands: usize,
    /// Where the last command starts, and how many words it has so far.
    last: Option<(usize, usize)>,
}

impl Packed {
    /// No command yet, with room for `bytes` bytes.
    pub(crate) fn with_capacity(bytes: usize) -> Self {
        Packed {
            bytes: Vec::with_capacity(bytes),
            ..Packed::default()
        }
    }

    /// Start the next command, named `name`.
    pub(crate) fn command(&mut self, name: &str) -> &mut Self {
        self.last = Some((self.bytes.len(), 0));
        self.bytes.extend_from_slice(b"*0\r\n");
        self.commands += 1;
        self.arg(name)
    }

    /// The next word of the last command: each word `arg` writes (a number is written in decimal,
    /// as redis-rs writes it).
    pub(crate) fn arg(&mut self, arg: impl ToRedisArgs) -> &mut Self {
        arg.write_redis_args(self);
        self
    }

    /// The commands, as Redis reads them.
    pub(crate) fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// How many commands there are (one answer each).
    pub(crate) fn len(&self) -> usize {
        self.commands
    }

    /// The commands, for a connection of redis-rs's.
    pub(crate) fn cmds(&self) -> Vec<Cmd> {
        let mut words = Words(&self.bytes);
        let mut cmds = Vec::with_capacity(self.commands);
        while let Some(count) = words.number(b'*') {
            let mut cmd = Cmd::with_capacity(count, self.bytes.len());
            for _ in 0..count {
                cmd.arg(words.bulk());
            }
            cmds.push(cmd);
        }
        cmds
    }

    /// The commands, as a pipeline of redis-rs's.
    pub(crate) fn pipeline(&self) -> redis::Pipeline {
        let mut pipe = redis::Pipeline::with_capacity(self.commands);
        for cmd in self.cmds() {
            pipe.add_command(cmd);
        }
        pipe
    }

    /// Count one more word of the last command, rewriting its count.
    fn counted(&mut self) {
        let (start, words) = self.last.as_mut().expect("a word before its command");
        let (at, old) = (*start + 1, *words);
        *words += 1;
        if old < 9 {
            // the usual command: one digit, rewritten in place
            self.bytes[at] = b'0' + old as u8 + 1;
            return;
        }
        let mut digits = [0u8; 20];
        let new = crate::ids::decimal(old as u64 + 1, &mut digits);
        let old_len = decimal_len(old as u64);
        self.bytes.splice(at..at + old_len, new.iter().copied());
    }
}

/// How many decimal digits `n` has.
fn decimal_len(n: u64) -> usize {
    n.checked_ilog10().map_or(1, |log| log as usize + 1)
}

/// The room a word's length takes at most: `$`, 20 digits and a line's end.
const HEADER_ROOM: usize = 23;

/// The line that gives a word's length, `len` bytes, written at the end of `room`.
fn word_header(len: usize, room: &mut [u8; HEADER_ROOM]) -> &[u8] {
    room[HEADER_ROOM - 2..].copy_from_slice(b"\r\n");
    let start = crate::ids::decimal_before(len as u64, room, HEADER_ROOM - 2) - 1;
    room[start] = b'$';
    &room[start..]
}

impl RedisWrite for Packed {
    fn write_arg(&mut self, arg: &[u8]) {
        let mut room = [0u8; HEADER_ROOM];
        let header = word_header(arg.len(), &mut room);
        self.bytes.reserve(header.len() + arg.len() + 2);
        self.bytes.extend_from_slice(header);
        self.bytes.extend_from_slice(arg);
        self.bytes.extend_from_slice(b"\r\n");
        self.counted();
    }

    fn writer_for_next_arg(&mut self) -> impl io::Write + '_ {
        let start = self.bytes.len();
        // the word goes after room for its length, which it moves up to once it is written
        self.bytes.resize(start + HEADER_ROOM, 0);
        WordWriter {
            packed: self,
            start,
        }
    }
}

/// The longest word [`write_joined`] joins on the stack.
const JOINED_ROOM: usize = 256;

/// Write one word made of `parts` to `out`. Joined on the stack where it fits, it is written
/// whole: a word written in pieces needs room made for its length, and a move once that is
/// known.
pub(crate) fn write_joined<W: ?Sized + RedisWrite>(out: &mut W, parts: &[&[u8]]) {
    let mut word = [0u8; JOINED_ROOM];
    let mut len = 0;
    for part in parts {
        let Some(room) = word.get_mut(len..len + part.len()) else {
            let mut arg = out.writer_for_next_arg();
            for part in parts {
                // the writer is the command's buffer, which takes every byte
                let _ = io::Write::write_all(&mut arg, part);
            }
            return;
        };
        room.copy_from_slice(part);
        len += part.len();
    }
    out.write_arg(&word[..len]);
}

/// Writes one word in pieces; its length goes before it when it is dropped.
struct WordWriter<'a> {
    packed: &'a mut Packed,
    start: usize,
}

impl io::Write for WordWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.packed.bytes.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Drop for WordWriter<'_> {
    fn drop(&mut self) {
        let (start, word) = (self.start, self.start + HEADER_ROOM);
        let bytes = &mut self.packed.bytes;
        let len = bytes.len() - word;
        let mut room = [0u8; HEADER_ROOM];
        let header = word_header(len, &mut room);
        let at = start + header.len();
        // the word moves down to just after its length
        bytes.copy_within(word.., at);
        bytes.truncate(at + len);
        bytes[start..at].copy_from_slice(header);
        bytes.extend_from_slice(b"\r\n");
        self.packed.counted();
    }
}

/// Reads back what a [`Packed`] wrote (nothing else: its input is known to be well formed).
struct Words<'a>(&'a [u8]);

impl<'a> Words<'a> {
    /// The number after `mark` and its line's end, if any is left.
    fn number(&mut self, mark: u8) -> Option<usize> {
        let rest = self.0.strip_prefix(&[mark])?;
        let end = rest.iter().position(|&b| b == b'\r')?;
        let n = rest[..end]
            .iter()
            .fold(0, |n, &d| n * 10 + usize::from(d - b'0'));
        self.0 = &rest[end + 2..];
        Some(n)
    }

    /// The next word.
    fn bulk(&mut self) -> &'a [u8] {
        let len = self.number(b'$').expect("a word Packed wrote");
        let (word, rest) = self.0.split_at(len);
        self.0 = &rest[2..];
        word
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn packed_by_redis(cmds: &[Cmd]) -> Vec<u8> {
        cmds.iter().flat_map(Cmd::get_packed_command).collect()
    }

    #[test]
    fn commands_are_written_as_redis_rs_writes_them() {
        let mut packed = Packed::with_capacity(16);
        packed.command("SET").arg("k").arg("v").arg("NX").arg("PX");
        packed.arg(30_000u64);
        packed.command("TIME");
        let mut eval = redis::cmd("EVALSHA");
        eval.arg("abc").arg(2).arg("k1").arg("");
        for n in 0..12u64 {
            eval.arg(n * 1_000_000_007);
        }
        packed
            .command("EVALSHA")
            .arg("abc")
            .arg(2)
            .arg("k1")
            .arg("");
        for n in 0..12u64 {
            packed.arg(n * 1_000_000_007);
        }
        let mut set = redis::cmd("SET");
        set.arg("k").arg("v").arg("NX").arg("PX").arg(30_000u64);
        let expected = [set, redis::cmd("TIME"), eval];
        assert_eq!(packed.bytes(), packed_by_redis(&expected));
        assert_eq!(packed.len(), 3);
        assert_eq!(packed_by_redis(&packed.cmds()), packed.bytes());
    }

    #[test]
    fn a_joined_word_is_one_word_whatever_its_length() {
        for tail in ["", &"x".repeat(300)] {
            let mut packed = Packed::default();
            packed.command("GET");
            write_joined(&mut packed, &[b"{tower-lock:k}", b":f", tail.as_bytes()]);
            let mut get = redis::cmd("GET");
            get.arg(format!("{{tower-lock:k}}:f{tail}"));
            assert_eq!(packed.bytes(), get.get_packed_command());
        }
    }

    #[test]
    fn a_word_written_in_pieces_gets_its_length_before_it() {
        struct Pieces;
        impl ToRedisArgs for Pieces {
            fn write_redis_args<W: ?Sized + RedisWrite>(&self, out: &mut W) {
                use std::io::Write;
                let mut word = out.writer_for_next_arg();
                for piece in ["{tower-lock:k}", ":fence", &"x".repeat(100)] {
                    word.write_all(piece.as_bytes()).unwrap();
                }
            }
        }
        let mut packed = Packed::default();
        packed.command("GET").arg(Pieces);
        let mut get = redis::cmd("GET");
        get.arg(format!("{{tower-lock:k}}:fence{}", "x".repeat(100)));
        assert_eq!(packed.bytes(), get.get_packed_command());
        assert_eq!(packed_by_redis(&packed.cmds()), packed.bytes());
    }
}
