//! N independent redis-server masters for the quorum tests, and what those tests read off them.

use std::time::Duration;

use tower_lock::LockManager;

use super::RedisServer;

/// Tokens each acquisition reserves (`TOKEN_BLOCK` in `src/backend/redis/common.lua`).
const TOKEN_BLOCK: u64 = 64;

/// Generous: a loaded 2-core machine running several servers can take long to answer.
pub const NODE_TIMEOUT: Duration = Duration::from_secs(1);

/// N redis-server processes, started in parallel.
pub struct Masters {
    pub servers: Vec<RedisServer>,
}

impl Masters {
    pub fn start(n: usize) -> Masters {
        let servers = std::thread::scope(|s| {
            let starting: Vec<_> = (0..n).map(|_| s.spawn(RedisServer::start)).collect();
            starting
                .into_iter()
                .map(|h| h.join().expect("start redis"))
                .collect()
        });
        Masters { servers }
    }

    pub fn urls(&self) -> Vec<String> {
        self.servers.iter().map(RedisServer::url).collect()
    }

    pub async fn manager(&self, lease: Duration) -> LockManager {
        LockManager::builder()
            .quorum(self.urls())
            .lease(lease)
            .node_timeout(NODE_TIMEOUT)
            .command_timeout(Duration::from_secs(1))
            .build()
            .await
            .expect("quorum manager")
    }

    /// Masters (among those up) where the lock hash of `key` exists.
    pub fn holding(&self, key: &str) -> usize {
        let lock = format!("{{tower-lock:{key}}}");
        self.servers
            .iter()
            .filter(|s| s.is_running())
            .filter(|s| s.try_cmd(&["EXISTS", &lock]).ok().and_then(|r| r.as_int()) == Some(1))
            .count()
    }

    /// The fencing counter of `key` on master `i`.
    pub fn counter(&self, i: usize, key: &str) -> u64 {
        let reply = self.servers[i].cmd(&["GET", &format!("{{tower-lock:{key}}}:f")]);
        // the counter holds the end of the block of tokens reserved with it: its first is the
        // token of the acquisition (`TOKEN_BLOCK` in common.lua)
        reply.as_int().map_or(0, |t| t as u64 - (TOKEN_BLOCK - 1))
    }

    /// Make master `i` issue its next token for `key` as if its clock ran `ahead` (the token is
    /// max(last + 1, clock in µs), so a counter set ahead acts exactly like that clock).
    pub fn clock_ahead(&self, i: usize, key: &str, ahead: Duration) {
        let time = self.servers[i].cmd(&["TIME"]).as_strings().expect("TIME");
        let now_us: u64 =
            time[0].parse::<u64>().unwrap() * 1_000_000 + time[1].parse::<u64>().unwrap();
        let ahead = now_us + ahead.as_micros() as u64;
        let fence = format!("{{tower-lock:{key}}}:f");
        let reply = self.servers[i].cmd(&["SET", &fence, &ahead.to_string(), "PX", "60000"]);
        assert!(reply.is_ok(), "{reply:?}");
    }

    /// Hold `key` on master `i` for someone else, for `ttl`.
    pub fn foreign_hold(&self, i: usize, key: &str, ttl: Duration) {
        let lock = format!("{{tower-lock:{key}}}");
        self.servers[i].cmd(&["HSET", &lock, "someone:1", "1", "#t", "1"]);
        self.servers[i].cmd(&["PEXPIRE", &lock, &ttl.as_millis().to_string()]);
    }

    pub fn evalsha_total(&self) -> u64 {
        self.servers
            .iter()
            .map(|s| s.command_calls("evalsha"))
            .sum()
    }
}
