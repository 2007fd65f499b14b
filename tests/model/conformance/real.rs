//! The real side: one redis-server running the crate's scripts, a subscribed inbox connection
//! per live manager, and the environment's steps (the clock, a snapshot, a restart with loss).

use std::time::Duration;

use redis::{Connection, Script, Value};

use super::lua::{Lua, ADVANCE, NOW_MS, READ_STATE, SHIFT};
use super::names::{self, MS_PER_TICK};
use super::support::RedisServer;
use crate::model::Loss;
use crate::state::{Client, Time};

/// A key as a snapshot keeps it: its name, its `DUMP` and its `PTTL`.
type Dumped = (String, Vec<u8>, i64);

/// The server, its connections, and the last snapshot taken.
pub struct Real {
    server: RedisServer,
    con: Connection,
    /// Client -> its manager's inbox connection, subscribed while the manager lives.
    inboxes: Vec<Option<Connection>>,
    pub lua: Lua,
    read_state: Script,
    advance: Script,
    shift: Script,
    now_ms: Script,
    /// The snapshot and the model time it was taken at.
    snapshot: Option<(Time, Vec<Dumped>)>,
}

fn invoke(con: &mut Connection, script: &Script, keys: &[String], args: &[String]) -> Value {
    let mut call = script.prepare_invoke();
    for key in keys {
        call.key(key);
    }
    for arg in args {
        call.arg(arg);
    }
    call.invoke(con)
        .unwrap_or_else(|e| panic!("script failed ({keys:?} {args:?}): {e}"))
}

fn connect(server: &RedisServer) -> Connection {
    let client = redis::Client::open(server.url()).expect("a redis URL");
    let con = client.get_connection().expect("a connection");
    con.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("a read timeout");
    con
}

impl Real {
    /// A fresh server (DEBUG enabled: a restart that loses nothing is a `DEBUG RELOAD`).
    pub fn start() -> Real {
        let server = RedisServer::start_with(&["--enable-debug-command", "yes"]);
        let con = connect(&server);
        Real {
            server,
            con,
            inboxes: Vec::new(),
            lua: Lua::load(),
            read_state: Script::new(READ_STATE),
            advance: Script::new(ADVANCE),
            shift: Script::new(SHIFT),
            now_ms: Script::new(NOW_MS),
            snapshot: None,
        }
    }

    /// Empties the server and subscribes the inboxes of `clients` managers.
    pub fn reset(&mut self, clients: u8) {
        self.command(&mut redis::cmd("FLUSHALL"));
        self.snapshot = None;
        self.inboxes = (0..clients)
            .map(|c| {
                let mut inbox = connect(&self.server);
                let mut subscribe = redis::cmd("SUBSCRIBE");
                subscribe.arg(format!("{}{}", names::PREFIX, names::manager(c)));
                inbox
                    .send_packed_command(&subscribe.get_packed_command())
                    .expect("SUBSCRIBE sent");
                inbox.recv_response().expect("subscribed");
                Some(inbox)
            })
            .collect();
    }

    fn command(&mut self, cmd: &mut redis::Cmd) -> Value {
        cmd.query(&mut self.con)
            .unwrap_or_else(|e| panic!("{cmd:?}: {e}"))
    }

    /// Runs the script `pick` chooses with `keys` and `args` as the crate's calls lay them out.
    pub fn call(&mut self, pick: fn(&Lua) -> &Script, keys: &[String], args: &[String]) -> Value {
        invoke(&mut self.con, pick(&self.lua), keys, args)
    }

    /// The messages published since the last call, per client, in order: a marker published to
    /// each live inbox after the step is read up to, so that every earlier message is in.
    pub fn messages(&mut self) -> Vec<(Client, String)> {
        let mut out = Vec::new();
        for c in 0..self.inboxes.len() {
            let channel = format!("{}{}", names::PREFIX, names::manager(c as Client));
            let Some(inbox) = self.inboxes[c].as_mut() else {
                continue;
            };
            let _: i64 = redis::cmd("PUBLISH")
                .arg(&channel)
                .arg("#marker")
                .query(&mut self.con)
                .expect("PUBLISH");
            loop {
                let message = inbox.recv_response().expect("an inbox message");
                let payload: Vec<String> = redis::from_redis_value(message).expect("a message");
                match payload.get(2).map(String::as_str) {
                    Some("#marker") => break,
                    Some(text) => out.push((c as Client, text.to_owned())),
                    None => panic!("not a message: {payload:?}"),
                }
            }
        }
        out
    }

    /// Runs `pipe` on the command connection, as the plain path sends its commands.
    pub fn pipeline<T: redis::FromRedisValue>(&mut self, pipe: &redis::Pipeline) -> T {
        pipe.query(&mut self.con)
            .unwrap_or_else(|e| panic!("{pipe:?}: {e}"))
    }

    /// Manager `c` stops listening (its process died).
    pub fn die(&mut self, c: Client) {
        if let Some(mut inbox) = self.inboxes[usize::from(c)].take() {
            inbox
                .send_packed_command(&redis::cmd("UNSUBSCRIBE").get_packed_command())
                .expect("UNSUBSCRIBE sent");
            inbox.recv_response().expect("unsubscribed");
        }
    }

    /// The clock advances one tick.
    pub fn tick(&mut self) {
        let step = MS_PER_TICK.to_string();
        invoke(&mut self.con, &self.advance, &[], &[step]);
    }

    /// Keeps every key as it is now, as a snapshot taken at model time `now`.
    pub fn snapshot(&mut self, now: Time) {
        let keys: Vec<String> = redis::cmd("KEYS")
            .arg("*")
            .query(&mut self.con)
            .expect("KEYS");
        let mut dumped = Vec::new();
        for key in keys {
            let (dump, pttl): (Vec<u8>, i64) = redis::pipe()
                .cmd("DUMP")
                .arg(&key)
                .cmd("PTTL")
                .arg(&key)
                .query(&mut self.con)
                .expect("DUMP");
            dumped.push((key, dump, pttl));
        }
        self.snapshot = Some((now, dumped));
    }

    /// The server restarts at model time `now` (one tick after the step before), losing `loss`.
    pub fn restart(&mut self, loss: Loss, now: Time) {
        match loss {
            Loss::Nothing => {
                self.command(redis::cmd("DEBUG").arg("RELOAD"));
                self.tick();
            }
            Loss::Everything => {
                self.command(&mut redis::cmd("FLUSHALL"));
            }
            Loss::ToSnapshot => {
                self.command(&mut redis::cmd("FLUSHALL"));
                let (taken, keys) = self.snapshot.clone().unwrap_or_default();
                let passed = i64::from(now - taken) * MS_PER_TICK as i64;
                for (key, dump, pttl) in keys {
                    let ttl = if pttl < 0 { 0 } else { pttl - passed };
                    if pttl >= 0 && ttl <= 0 {
                        continue;
                    }
                    self.command(redis::cmd("RESTORE").arg(&key).arg(ttl).arg(dump));
                    if key.ends_with(":s") {
                        let shift = [passed.to_string()];
                        invoke(&mut self.con, &self.shift, &[key], &shift);
                    }
                }
            }
        }
    }

    /// The server's clock in ms (the lease ends of a shared lock's holders are read against it).
    pub fn now_ms(&mut self) -> i64 {
        let value = invoke(&mut self.con, &self.now_ms, &[], &[]);
        redis::from_redis_value(value).expect("the clock")
    }

    /// Every key: `(key, type, pttl, content)`.
    pub fn state(&mut self) -> Vec<(String, String, i64, Vec<String>)> {
        let value = invoke(&mut self.con, &self.read_state, &[], &[]);
        redis::from_redis_value(value).expect("the state")
    }
}
