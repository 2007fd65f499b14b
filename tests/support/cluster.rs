//! A local Redis Cluster for the tests: 3 masters and 3 replicas, each its own `redis-server`
//! process on a free loopback port, joined by `redis-cli --cluster create`, all killed on drop.
//! Standard library only, like the rest of `support`.

use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use super::RedisServer;

/// How long a node may be unreachable before the cluster fails it over.
pub const NODE_TIMEOUT_MS: u64 = 1000;

/// How long `redis-cli --cluster create` may take before the nodes are given up: it joins a
/// healthy cluster in a few seconds.
const JOIN_TIMEOUT: Duration = Duration::from_secs(30);

/// How many sets of nodes are tried before a test fails for want of a cluster.
const JOIN_ATTEMPTS: usize = 3;

/// Three masters and a replica of each.
pub struct Cluster {
    pub nodes: Vec<RedisServer>,
}

impl Cluster {
    /// Start the nodes, create the cluster, and wait until every node sees it whole. A join
    /// that stalls (seen on a loaded machine: a node that never learnt of the one that met it,
    /// and `redis-cli` waiting for them forever) is given up after [`JOIN_TIMEOUT`] and tried
    /// again with new nodes.
    pub fn start() -> Cluster {
        for _ in 1..JOIN_ATTEMPTS {
            if let Some(cluster) = Cluster::try_start() {
                return cluster;
            }
            eprintln!("support: the cluster did not join; starting new nodes");
        }
        Cluster::try_start().expect("support: the cluster did not join, three times")
    }

    /// Start the nodes and create the cluster; `None` when `redis-cli` did not finish within
    /// [`JOIN_TIMEOUT`].
    fn try_start() -> Option<Cluster> {
        let timeout = NODE_TIMEOUT_MS.to_string();
        let args = [
            "--cluster-enabled",
            "yes",
            "--cluster-config-file",
            "nodes.conf",
            "--cluster-node-timeout",
            timeout.as_str(),
            // a replica fails over however long ago it last heard from its master
            "--cluster-replica-validity-factor",
            "0",
        ];
        let nodes: Vec<RedisServer> = thread::scope(|s| {
            let starting: Vec<_> = (0..6)
                .map(|_| s.spawn(|| RedisServer::start_with(&args)))
                .collect();
            starting
                .into_iter()
                .map(|h| h.join().expect("start"))
                .collect()
        });
        let addresses: Vec<String> = nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port()))
            .collect();
        let mut create = Command::new("redis-cli")
            .args(["--cluster", "create"])
            .args(&addresses)
            .args(["--cluster-replicas", "1", "--cluster-yes"])
            .stdout(Stdio::null())
            .spawn()
            .expect("support: redis-cli (apt-get install redis-tools)");
        let given_up = Instant::now() + JOIN_TIMEOUT;
        let status = loop {
            if let Some(status) = create.try_wait().expect("support: redis-cli") {
                break status;
            }
            if Instant::now() > given_up {
                let _ = create.kill();
                let _ = create.wait();
                return None;
            }
            thread::sleep(Duration::from_millis(50));
        };
        assert!(
            status.success(),
            "support: redis-cli --cluster create: {status}"
        );
        let cluster = Cluster { nodes };
        cluster.wait_until("the cluster is whole", |c| {
            c.nodes.iter().all(|n| {
                let info = n.cmd(&["CLUSTER", "INFO"]).as_string().unwrap_or_default();
                info.contains("cluster_state:ok") && info.contains("cluster_known_nodes:6")
            }) && c.masters().len() == 3
        });
        Some(cluster)
    }

    /// `redis://127.0.0.1:PORT` of every node.
    pub fn urls(&self) -> Vec<String> {
        self.nodes.iter().map(RedisServer::url).collect()
    }

    /// The nodes that are masters now (and running).
    pub fn masters(&self) -> Vec<&RedisServer> {
        self.nodes
            .iter()
            .filter(|n| n.is_running())
            .filter(|n| {
                let role = n.try_cmd(&["ROLE"]).ok();
                let first = role
                    .as_ref()
                    .and_then(|r| r.as_array()?.first()?.as_string());
                first.as_deref() == Some("master")
            })
            .collect()
    }

    /// The master that owns the slot of `key`, as a running node sees the cluster now.
    pub fn master_of(&self, key: &str) -> &RedisServer {
        let any = self
            .nodes
            .iter()
            .find(|n| n.is_running())
            .expect("a running node");
        let slot = any
            .cmd(&["CLUSTER", "KEYSLOT", key])
            .as_int()
            .expect("KEYSLOT");
        let port = owner_port(&any.cmd(&["CLUSTER", "SLOTS"]), slot).expect("an owner");
        self.nodes
            .iter()
            .find(|n| n.port() == port)
            .expect("the owner is ours")
    }

    /// Move the slot of `key` (with its keys) from its master to another master, as a resharding
    /// does. Returns the port of the new owner.
    pub fn move_slot_of(&self, key: &str) -> u16 {
        let moving = self.start_moving_slot_of(key);
        self.finish_moving(&moving);
        moving.target
    }

    /// Begin moving the slot of `key` to another master: `CLUSTER SETSLOT ... IMPORTING` on it,
    /// `MIGRATING` on the owner. Until [`finish_moving`](Self::finish_moving), the owner answers
    /// `ASK` for keys of the slot it does not have.
    pub fn start_moving_slot_of(&self, key: &str) -> SlotMove {
        let source = self.master_of(key);
        let target = (self.masters().into_iter())
            .find(|m| m.port() != source.port())
            .expect("another master");
        let slot = source
            .cmd(&["CLUSTER", "KEYSLOT", key])
            .as_int()
            .unwrap()
            .to_string();
        let id = |node: &RedisServer| node.cmd(&["CLUSTER", "MYID"]).as_string().unwrap();
        let moving = SlotMove {
            slot,
            source: source.port(),
            target: target.port(),
            source_id: id(source),
            target_id: id(target),
        };
        ok(target.cmd(&[
            "CLUSTER",
            "SETSLOT",
            &moving.slot,
            "IMPORTING",
            &moving.source_id,
        ]));
        ok(source.cmd(&[
            "CLUSTER",
            "SETSLOT",
            &moving.slot,
            "MIGRATING",
            &moving.target_id,
        ]));
        moving
    }

    /// `MIGRATE` the slot's keys, then `CLUSTER SETSLOT ... NODE` on every master.
    pub fn finish_moving(&self, moving: &SlotMove) {
        let node = |port: u16| self.nodes.iter().find(|n| n.port() == port).unwrap();
        let (source, target) = (node(moving.source), node(moving.target));
        let slot = moving.slot.as_str();
        loop {
            let keys = source.cmd(&["CLUSTER", "GETKEYSINSLOT", slot, "100"]);
            let keys = keys.as_strings().unwrap();
            if keys.is_empty() {
                break;
            }
            let port = target.port().to_string();
            let mut migrate = vec!["MIGRATE", "127.0.0.1", &port, "", "0", "5000", "KEYS"];
            migrate.extend(keys.iter().map(String::as_str));
            ok(source.cmd(&migrate));
        }
        let others = self
            .masters()
            .into_iter()
            .filter(|m| m.port() != moving.source && m.port() != moving.target);
        for master in [target, source].into_iter().chain(others) {
            ok(master.cmd(&["CLUSTER", "SETSLOT", slot, "NODE", &moving.target_id]));
        }
    }

    /// Wait (at most 30 s) until `done` holds.
    pub fn wait_until(&self, what: &str, done: impl Fn(&Cluster) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while !done(self) {
            assert!(
                Instant::now() < deadline,
                "support: timed out waiting for {what}"
            );
            thread::sleep(Duration::from_millis(50));
        }
    }
}

/// A slot on its way from one master to another.
pub struct SlotMove {
    pub slot: String,
    pub source: u16,
    pub target: u16,
    source_id: String,
    target_id: String,
}

fn ok(reply: super::Reply) {
    assert!(reply.is_ok(), "support: {reply:?}");
}

/// The port of the master that `CLUSTER SLOTS` (`ranges`) names for `slot`.
fn owner_port(ranges: &super::Reply, slot: i64) -> Option<u16> {
    let super::Reply::Array(Some(ranges)) = ranges else {
        return None;
    };
    ranges.iter().find_map(|range| {
        let super::Reply::Array(Some(fields)) = range else {
            return None;
        };
        let (start, end) = (fields.first()?.as_int()?, fields.get(1)?.as_int()?);
        if !(start..=end).contains(&slot) {
            return None;
        }
        let super::Reply::Array(Some(master)) = fields.get(2)? else {
            return None;
        };
        u16::try_from(master.get(1)?.as_int()?).ok()
    })
}
