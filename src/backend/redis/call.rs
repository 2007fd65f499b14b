//! One script call, written straight into its `EVALSHA` command as Redis reads it (`packed.rs`).
//! `redis::ScriptInvocation` keeps every key and argument in a buffer of its own and copies them
//! all again into the command (BENCHMARKS.md, "Many keys").

use redis::{ErrorKind, FromRedisValue, RedisResult, Script, ServerErrorKind, ToRedisArgs, Value};

use super::names::Suffixed;
use super::packed::Packed;
use super::pool::Channel;

/// An `EVALSHA` of one script: its keys first, then its arguments.
pub(crate) struct ScriptCall {
    script: &'static Script,
    cmd: Packed,
    /// Keys still to come.
    keys_left: usize,
}

impl ScriptCall {
    /// A call of `script` with `keys` keys: give exactly that many [`key`](Self::key)s, then the
    /// arguments.
    pub(crate) fn new(script: &'static Script, keys: usize) -> Self {
        // Room for the keys, as many arguments (a lock's are short: owner ids, numbers), and a few
        // more, so that building the command does not grow it again and again.
        let words = 3 + 2 * keys + 4;
        let mut cmd = Packed::with_capacity(64 + 56 * words);
        cmd.command("EVALSHA").arg(script.get_hash()).arg(keys);
        ScriptCall {
            script,
            cmd,
            keys_left: keys,
        }
    }

    /// A call of `script` on the lock `lock`, whose other keys `named` are declared only when
    /// `declared` (on a cluster); else the script names them after the lock itself (`names.rs`).
    /// Each key costs Redis more than a name the script builds. A cluster must be told every key:
    /// while the lock's slot moves, it refuses a call whose keys are not all on one node before
    /// the call runs, where an undeclared key would fail it halfway.
    pub(crate) fn on_lock(
        script: &'static Script,
        lock: &str,
        named: &[Suffixed<'_>],
        declared: bool,
    ) -> Self {
        let named = if declared { named } else { &[] };
        let mut call = ScriptCall::new(script, 1 + named.len());
        call.key(lock);
        for &key in named {
            call.key(key);
        }
        call
    }

    /// The next key.
    pub(crate) fn key(&mut self, key: impl ToRedisArgs) -> &mut Self {
        debug_assert!(self.keys_left > 0, "more keys than declared");
        self.keys_left = self.keys_left.saturating_sub(1);
        self.cmd.arg(key);
        self
    }

    /// The next argument (after every key).
    pub(crate) fn arg(&mut self, arg: impl ToRedisArgs) -> &mut Self {
        debug_assert_eq!(self.keys_left, 0, "an argument before the last key");
        self.cmd.arg(arg);
        self
    }

    /// The `EVALSHA` command, as it goes to Redis.
    pub(crate) fn packed(&self) -> &Packed {
        debug_assert_eq!(self.keys_left, 0, "fewer keys than declared");
        &self.cmd
    }

    /// Run the call; a server that lost the script (restarted, or its cache flushed) gets it
    /// loaded and the call again.
    pub(crate) async fn invoke<T: FromRedisValue>(&self, conn: &mut Channel) -> RedisResult<T> {
        debug_assert_eq!(self.keys_left, 0, "fewer keys than declared");
        // a server's error answer becomes an error, as `Cmd::query_async` makes it
        let answer = match conn
            .query_packed(&self.cmd)
            .await
            .and_then(Value::extract_error)
        {
            Err(err) if err.kind() == ErrorKind::Server(ServerErrorKind::NoScript) => {
                conn.load(self.script).await?;
                conn.query_packed(&self.cmd)
                    .await
                    .and_then(Value::extract_error)
            }
            answer => answer,
        }?;
        Ok(T::from_redis_value(answer)?)
    }
}

/// One round trip on a lock's connection: a script call, reads, or the plain path's commands.
pub(crate) trait RoundTrip {
    /// Send it on `conn` and read its answer as a `T`.
    async fn run<T: FromRedisValue>(&self, conn: &mut Channel) -> RedisResult<T>;
}

impl RoundTrip for ScriptCall {
    async fn run<T: FromRedisValue>(&self, conn: &mut Channel) -> RedisResult<T> {
        self.invoke(conn).await
    }
}

/// Commands that only read, sent in one write.
pub(crate) struct Reads(pub(crate) redis::Pipeline);

impl RoundTrip for Reads {
    async fn run<T: FromRedisValue>(&self, conn: &mut Channel) -> RedisResult<T> {
        conn.pipeline(&self.0).await
    }
}
