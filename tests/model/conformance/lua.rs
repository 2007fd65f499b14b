//! The real scripts, assembled as the crate assembles them (its own `scripts.rs`, included here,
//! on the same `.lua` files), with the grant's bound scaled down to the model's. A test of the
//! run's teeth may seed one change in a script's text (a [`Mutation`]).

#[allow(dead_code)]
#[path = "../../../src/backend/redis/scripts.rs"]
mod crate_scripts;

use crate::shared_scripts::SHARED_LOOKED;
use crate::state::MAX_LOOKED;
use redis::Script;

/// One change seeded in the text of a real script: `from` replaced by `to` in `file`.
#[derive(Clone, Copy, Debug)]
pub struct Mutation {
    pub file: &'static str,
    pub from: &'static str,
    pub to: &'static str,
}

/// The scripts the model mirrors, as a standalone server runs them.
pub struct Lua {
    pub acquire: Script,
    pub release: Script,
    pub renew: Script,
    pub abandon: Script,
    pub fair_acquire: Script,
    pub fair_abandon: Script,
    pub heartbeat: Script,
    pub grant_on: Script,
    pub plain_release: Script,
    pub shared_acquire: Script,
    pub shared_release: Script,
    pub shared_abandon: Script,
    /// grant_on.lua with the shared model's bound.
    pub shared_grant_on: Script,
}

/// `body` assembled with its helpers, `MAX_LOOKED` set to `bound`, the model's (1000 in the
/// crate: a queue of 1000 dead waiters is beyond a conformance run, one is not).
fn scaled(body: &str, bound: u8) -> Script {
    let source = crate_scripts::assemble(body);
    if !source.contains("MAX_LOOKED") {
        return Script::new(&source);
    }
    let at = source
        .find("local MAX_LOOKED = ")
        .expect("the grant's bound is a constant of common.lua");
    let end = at + source[at..].find('\n').expect("a line");
    let scaled = format!("local MAX_LOOKED = {bound}");
    Script::new(&format!("{}{scaled}{}", &source[..at], &source[end..]))
}

/// The text of `file` with `mutation` applied if it is that file's.
fn text(file: &'static str, body: &'static str, mutation: Option<Mutation>) -> String {
    match mutation.filter(|m| m.file == file) {
        Some(m) => {
            assert!(body.contains(m.from), "{file} has no {:?}", m.from);
            body.replacen(m.from, m.to, 1)
        }
        None => body.to_owned(),
    }
}

/// A script of the crate by its file name, with `$mutation` seeded if it is that file's, and
/// the grant's bound `$bound`.
macro_rules! crate_script {
    ($file:literal, $mutation:expr, $bound:expr) => {
        scaled(
            &text(
                $file,
                include_str!(concat!("../../../src/backend/redis/", $file)),
                $mutation,
            ),
            $bound,
        )
    };
}

impl Lua {
    /// Every script the model mirrors.
    pub fn load() -> Lua {
        Lua::mutated(None)
    }

    /// Every script the model mirrors, with `mutation` seeded in its script's text.
    pub fn mutated(mutation: Option<Mutation>) -> Lua {
        let (m, one, two) = (mutation, MAX_LOOKED, SHARED_LOOKED);
        Lua {
            acquire: crate_script!("acquire.lua", m, one),
            release: crate_script!("release.lua", m, one),
            renew: crate_script!("renew.lua", m, one),
            abandon: crate_script!("abandon.lua", m, one),
            fair_acquire: crate_script!("fair_acquire.lua", m, one),
            fair_abandon: crate_script!("fair_abandon.lua", m, one),
            heartbeat: crate_script!("heartbeat.lua", m, one),
            grant_on: crate_script!("grant_on.lua", m, one),
            plain_release: crate_script!("plain_release.lua", m, one),
            shared_acquire: crate_script!("shared_acquire.lua", m, two),
            shared_release: crate_script!("shared_release.lua", m, two),
            shared_abandon: crate_script!("shared_abandon.lua", m, two),
            shared_grant_on: crate_script!("grant_on.lua", m, two),
        }
    }
}

/// Reads every key: `{key, type, pttl, content}` (content: a hash's fields and values, a list,
/// a sorted set's members in order, a string's value).
pub const READ_STATE: &str = r"
local out = {}
for _, key in ipairs(redis.call('KEYS', '*')) do
  local kind = redis.call('TYPE', key)['ok']
  local content = {}
  if kind == 'hash' then content = redis.call('HGETALL', key)
  elseif kind == 'list' then content = redis.call('LRANGE', key, 0, -1)
  elseif kind == 'zset' then content = redis.call('ZRANGE', key, 0, -1, 'WITHSCORES')
  elseif kind == 'string' then content = {redis.call('GET', key)} end
  table.insert(out, {key, kind, redis.call('PTTL', key), content})
end
return out
";

/// Advances the server's clock by ARGV[1] ms as far as expiries go: every key's expiry comes
/// that much nearer, and a key whose expiry it reaches goes (the model drops a key whose expiry
/// is not after its clock); the lease ends a shared lock's holders' zset (`:s`) keeps in server
/// ms come that much nearer too.
pub const ADVANCE: &str = r"
local step = tonumber(ARGV[1])
for _, key in ipairs(redis.call('KEYS', '*')) do
  local ttl = redis.call('PTTL', key)
  if ttl > 0 then
    if ttl <= step then redis.call('DEL', key) else redis.call('PEXPIRE', key, ttl - step) end
  end
  if string.sub(key, -2) == ':s' and redis.call('TYPE', key)['ok'] == 'zset' then
    local ends = redis.call('ZRANGE', key, 0, -1, 'WITHSCORES')
    for i = 1, #ends, 2 do
      redis.call('ZADD', key, string.format('%d', tonumber(ends[i + 1]) - step), ends[i])
    end
  end
end
return 0
";

/// Brings the lease ends in the holders' zset KEYS[1] ARGV[1] ms nearer (a snapshot restored
/// that long after it was taken).
pub const SHIFT: &str = r"
local ends = redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')
for i = 1, #ends, 2 do
  redis.call('ZADD', KEYS[1], string.format('%d', tonumber(ends[i + 1]) - tonumber(ARGV[1])), ends[i])
end
return 0
";

/// The server's clock in ms.
pub const NOW_MS: &str = r"
local t = redis.call('TIME')
return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
";
