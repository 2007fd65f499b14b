//! The real scripts, assembled as the crate assembles them (its own `scripts.rs`, included here,
//! on the same `.lua` files), with the grant's bound scaled down to the model's.

#[allow(dead_code)]
#[path = "../../../src/backend/redis/scripts.rs"]
mod crate_scripts;

use crate::state::MAX_LOOKED;
use redis::Script;

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
}

/// `body` assembled with its helpers, `MAX_LOOKED` set to the model's bound (1000 in the
/// crate: a queue of 1000 dead waiters is beyond a conformance run, one is not).
fn script(body: &str) -> Script {
    let source = crate_scripts::assemble(body);
    if !source.contains("MAX_LOOKED") {
        return Script::new(&source);
    }
    let at = source
        .find("local MAX_LOOKED = ")
        .expect("the grant's bound is a constant of common.lua");
    let end = at + source[at..].find('\n').expect("a line");
    let scaled = format!("local MAX_LOOKED = {MAX_LOOKED}");
    Script::new(&format!("{}{scaled}{}", &source[..at], &source[end..]))
}

impl Lua {
    /// Every script the model mirrors.
    pub fn load() -> Lua {
        Lua {
            acquire: script(include_str!("../../../src/backend/redis/acquire.lua")),
            release: script(include_str!("../../../src/backend/redis/release.lua")),
            renew: script(include_str!("../../../src/backend/redis/renew.lua")),
            abandon: script(include_str!("../../../src/backend/redis/abandon.lua")),
            fair_acquire: script(include_str!("../../../src/backend/redis/fair_acquire.lua")),
            fair_abandon: script(include_str!("../../../src/backend/redis/fair_abandon.lua")),
            heartbeat: script(include_str!("../../../src/backend/redis/heartbeat.lua")),
            grant_on: script(include_str!("../../../src/backend/redis/grant_on.lua")),
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
  elseif kind == 'zset' then content = redis.call('ZRANGE', key, 0, -1)
  elseif kind == 'string' then content = {redis.call('GET', key)} end
  table.insert(out, {key, kind, redis.call('PTTL', key), content})
end
return out
";

/// Advances the server's clock by ARGV[1] ms as far as expiries go: every key's expiry comes
/// that much nearer, and a key whose expiry it reaches goes (the model drops a key whose expiry
/// is not after its clock).
pub const ADVANCE: &str = r"
local step = tonumber(ARGV[1])
for _, key in ipairs(redis.call('KEYS', '*')) do
  local ttl = redis.call('PTTL', key)
  if ttl > 0 then
    if ttl <= step then redis.call('DEL', key) else redis.call('PEXPIRE', key, ttl - step) end
  end
end
return 0
";
