//! A Redis service under Sentinel for the tests: a master, one replica and three Sentinels, each
//! its own `redis-server` process on a free loopback port, and a failover on demand. Standard
//! library only, like the rest of `support`.

use std::fs;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use super::{free_port, redis_cmd, RedisServer};

/// The name the Sentinels know the service by.
pub const SERVICE: &str = "mymaster";

/// A master, its replica and three Sentinels watching them. Everything is killed on drop.
pub struct SentinelService {
    pub master: RedisServer,
    pub replica: RedisServer,
    sentinels: Vec<(u16, Child, PathBuf)>,
}

impl SentinelService {
    /// Start the service and wait until every Sentinel knows the master and its replica.
    pub fn start() -> SentinelService {
        let master = RedisServer::start();
        let replica = RedisServer::start();
        let reply = replica.cmd(&["REPLICAOF", "127.0.0.1", &master.port().to_string()]);
        assert!(reply.is_ok(), "support: REPLICAOF: {reply:?}");
        wait_for("the replica to sync", || {
            replica
                .info("replication")
                .contains("master_link_status:up")
        });
        let sentinels = (0..3).map(|_| spawn_sentinel(master.port())).collect();
        let service = SentinelService {
            master,
            replica,
            sentinels,
        };
        wait_for("every Sentinel to see the replica", || {
            service.sentinel_ports().iter().all(|&port| {
                let master = redis_cmd(port, &["SENTINEL", "MASTER", SERVICE]);
                let fields = master.ok().and_then(|r| r.as_strings()).unwrap_or_default();
                let field = |name: &str| {
                    let at = fields.iter().position(|f| f == name)?;
                    fields.get(at + 1).cloned()
                };
                field("num-slaves").as_deref() == Some("1")
                    && field("num-other-sentinels").as_deref() == Some("2")
            })
        });
        service
    }

    /// `redis://127.0.0.1:PORT` of every Sentinel.
    pub fn sentinel_urls(&self) -> Vec<String> {
        let ports = self.sentinel_ports();
        ports
            .iter()
            .map(|p| format!("redis://127.0.0.1:{p}"))
            .collect()
    }

    fn sentinel_ports(&self) -> Vec<u16> {
        self.sentinels.iter().map(|(port, _, _)| *port).collect()
    }

    /// The port of the master as the first Sentinel names it.
    pub fn master_port(&self) -> Option<u16> {
        let reply = redis_cmd(
            self.sentinel_ports()[0],
            &["SENTINEL", "GET-MASTER-ADDR-BY-NAME", SERVICE],
        );
        reply.ok()?.as_strings()?.get(1)?.parse().ok()
    }

    /// Promote the replica (`SENTINEL FAILOVER`) and wait until the Sentinels name it master, it
    /// takes writes, and the old master is its replica.
    pub fn fail_over(&self) {
        let reply = redis_cmd(self.sentinel_ports()[0], &["SENTINEL", "FAILOVER", SERVICE]);
        assert!(
            reply.as_ref().is_ok_and(|r| r.is_ok()),
            "support: SENTINEL FAILOVER: {reply:?}"
        );
        let promoted = self.replica.port();
        wait_for("the replica to become master", || {
            self.master_port() == Some(promoted)
                && self.replica.info("replication").contains("role:master")
                && self.master.info("replication").contains("role:slave")
        });
    }
}

impl Drop for SentinelService {
    fn drop(&mut self) {
        for (_, child, dir) in &mut self.sentinels {
            let _ = child.kill();
            let _ = child.wait();
            let _ = fs::remove_dir_all(dir);
        }
    }
}

/// A Sentinel on a free port watching the master on `master_port` (quorum 2 of 3).
fn spawn_sentinel(master_port: u16) -> (u16, Child, PathBuf) {
    let port = free_port();
    let dir =
        std::env::temp_dir().join(format!("tower-lock-sentinel-{port}-{}", std::process::id()));
    fs::create_dir_all(&dir).expect("support: sentinel dir");
    let config = dir.join("sentinel.conf");
    let text = format!(
        "port {port}\nbind 127.0.0.1\nprotected-mode no\ndir {dir}\nlogfile {dir}/sentinel.log\n\
         sentinel monitor {SERVICE} 127.0.0.1 {master_port} 2\n\
         sentinel down-after-milliseconds {SERVICE} 1000\n\
         sentinel failover-timeout {SERVICE} 10000\n",
        dir = dir.display()
    );
    fs::write(&config, text).expect("support: sentinel.conf");
    let child = Command::new("redis-server")
        .arg(&config)
        .arg("--sentinel")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("support: redis-server --sentinel");
    wait_for("a Sentinel to answer", || {
        redis_cmd(port, &["PING"]).is_ok()
    });
    (port, child, dir)
}

/// Poll `ready` every 50 ms for up to 30 s; panic naming `what` if it never holds.
fn wait_for(what: &str, mut ready: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !ready() {
        assert!(
            Instant::now() < deadline,
            "support: timed out waiting for {what}"
        );
        thread::sleep(Duration::from_millis(50));
    }
}
