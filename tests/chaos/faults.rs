//! The fault schedule: one fault at a time, a random one of [`Kind::ALL`] on a random server or
//! client, with random gaps, from a seeded generator, until shortly before the deadline.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

use crate::support::proxy::Proxy;
use crate::support::{wait_until, RedisServer};
use crate::{now_ns, Mode, Rng, LEASE};

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Kind {
    /// `CLIENT KILL TYPE normal`: every command connection.
    KillCommands,
    /// `CLIENT KILL TYPE pubsub`: every inbox.
    KillPubsub,
    /// SIGKILL and a restart with no data.
    RestartEmpty,
    /// `SAVE`, SIGKILL, and a restart from the snapshot.
    RestartRdb,
    /// An `everysec` AOF, SIGKILL, the AOF cut back to its size a second before (what a machine
    /// crash leaves of it), and a restart from it.
    RestartAof,
    /// SIGSTOP Redis for up to 1.5 leases.
    PauseRedis,
    /// SIGSTOP a client process for longer than its lease.
    PauseClient,
    /// SIGKILL a client process (a machine that dies) and start a new one in its place.
    KillClient,
    /// A client's proxies forward nothing for about a lease (connections kept open).
    Partition,
    /// One of a client's proxies forwards nothing for about a lease: on a quorum, the client is
    /// cut off from one master while it still reaches the others.
    PartitionOne,
    /// A client's proxies close every connection.
    Cut,
    /// A client's proxies delay every byte.
    Delay,
    /// A client's proxies forward nothing while the server restarts (empty, or from a snapshot)
    /// behind them: a restart the client cannot see until the partition heals.
    HiddenRestart,
    /// A process queues thousands of waiters (every hold through Redis) and is killed: dead
    /// waiters far past every script's skip bound, in front of the live ones.
    DeadWaiters,
}

impl Kind {
    pub const ALL: [Kind; 14] = [
        Kind::KillCommands,
        Kind::KillPubsub,
        Kind::RestartEmpty,
        Kind::RestartRdb,
        Kind::RestartAof,
        Kind::PauseRedis,
        Kind::PauseClient,
        Kind::KillClient,
        Kind::Partition,
        Kind::PartitionOne,
        Kind::Cut,
        Kind::Delay,
        Kind::HiddenRestart,
        Kind::DeadWaiters,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Kind::KillCommands => "kill-commands",
            Kind::KillPubsub => "kill-pubsub",
            Kind::RestartEmpty => "restart-empty",
            Kind::RestartRdb => "restart-rdb",
            Kind::RestartAof => "restart-cut-aof",
            Kind::PauseRedis => "pause-redis",
            Kind::PauseClient => "pause-client",
            Kind::KillClient => "kill-client",
            Kind::Partition => "partition",
            Kind::PartitionOne => "partition-one",
            Kind::Cut => "cut",
            Kind::Delay => "delay",
            Kind::HiddenRestart => "hidden-restart",
            Kind::DeadWaiters => "dead-waiters",
        }
    }

    /// A restart that may forget locks: the README promises no exclusion across it (that needs
    /// `appendfsync always`, or a restart delayed by a lease), only fencing and the lost signal.
    pub fn forgets_locks(self) -> bool {
        matches!(
            self,
            Kind::RestartEmpty | Kind::RestartRdb | Kind::RestartAof | Kind::HiddenRestart
        )
    }

    fn on_client(self) -> bool {
        matches!(
            self,
            Kind::PauseClient
                | Kind::KillClient
                | Kind::Partition
                | Kind::PartitionOne
                | Kind::Cut
                | Kind::Delay
        )
    }
}

/// One fault as it happened: on server or client `target`, from `start` to `end` (ns, wall clock;
/// `end` is when the server answers again, the client runs again, the proxy forwards again).
#[derive(Debug, Clone)]
pub struct Fault {
    pub kind: Kind,
    pub target: usize,
    pub start: u64,
    pub end: u64,
}

/// The client processes: their pids, and how to start a new one in place of client `i` (after a
/// kill), which returns its pid.
pub struct Clients<'a> {
    pub pids: Vec<u32>,
    pub respawn: &'a mut dyn FnMut(usize) -> u32,
}

/// Runs faults until `until` (wall-clock ns) is near; returns them.
pub fn run(
    servers: &mut [RedisServer],
    proxies: &[Vec<Proxy>],
    clients: &mut Clients,
    mode: Mode,
    (seed, until): (u64, u64),
) -> Vec<Fault> {
    let mut rng = Rng::new(seed);
    let began = now_ns();
    let mut done = Vec::new();
    loop {
        sleep(rng.between(Duration::from_millis(300), Duration::from_millis(1500)));
        // the longest fault takes about 4 s: leave the clients some calm before the deadline
        if now_ns() + 5_000_000_000 > until {
            break;
        }
        let kind = Kind::ALL[rng.below(Kind::ALL.len())];
        let target = rng.below(if kind.on_client() {
            clients.pids.len()
        } else {
            servers.len()
        });
        let start = now_ns();
        let detail = inject(kind, target, servers, proxies, clients, mode, &mut rng);
        let end = now_ns();
        println!(
            "  {:>5.1}s {:<15} {} {target} ({:.1} s{detail})",
            (start - began) as f64 / 1e9,
            kind.name(),
            if kind.on_client() { "client" } else { "server" },
            (end - start) as f64 / 1e9,
        );
        done.push(Fault {
            kind,
            target,
            start,
            end,
        });
    }
    done
}

fn inject(
    kind: Kind,
    target: usize,
    servers: &mut [RedisServer],
    proxies: &[Vec<Proxy>],
    clients: &mut Clients,
    mode: Mode,
    rng: &mut Rng,
) -> String {
    match kind {
        Kind::KillCommands => drop(servers[target].try_cmd(&["CLIENT", "KILL", "TYPE", "normal"])),
        Kind::KillPubsub => drop(servers[target].try_cmd(&["CLIENT", "KILL", "TYPE", "pubsub"])),
        Kind::RestartEmpty => {
            let server = &mut servers[target];
            forget_files(server.dir());
            server.restart();
        }
        Kind::RestartRdb => {
            let server = &mut servers[target];
            let saved = server.cmd(&["SAVE"]);
            assert!(saved.is_ok(), "SAVE: {saved:?}");
            server.restart_from_files(&[]);
            forget_files(server.dir());
        }
        Kind::RestartAof => return restart_from_cut_aof(&mut servers[target], rng),
        Kind::PauseRedis => {
            servers[target].stop_process();
            sleep(rng.between(Duration::from_millis(300), LEASE * 3 / 2));
            servers[target].continue_process();
        }
        Kind::PauseClient => {
            signal(clients.pids[target], "STOP");
            crate::support::stopped::wait_until_stopped(clients.pids[target]);
            sleep(LEASE + rng.between(Duration::from_millis(200), Duration::from_millis(1500)));
            signal(clients.pids[target], "CONT");
        }
        Kind::KillClient => {
            signal(clients.pids[target], "KILL");
            clients.pids[target] = (clients.respawn)(target);
        }
        Kind::Partition => {
            proxies[target].iter().for_each(Proxy::blackhole);
            sleep(rng.between(LEASE * 3 / 4, LEASE * 3 / 2));
            proxies[target].iter().for_each(Proxy::heal);
        }
        Kind::PartitionOne => {
            let proxy = &proxies[target][rng.below(proxies[target].len())];
            proxy.blackhole();
            sleep(rng.between(LEASE * 3 / 4, LEASE * 3 / 2));
            proxy.heal();
        }
        Kind::Cut => proxies[target].iter().for_each(Proxy::cut),
        Kind::Delay => {
            let delay = rng.between(Duration::from_millis(20), Duration::from_millis(150));
            proxies[target].iter().for_each(|p| p.set_delay(delay));
            sleep(rng.between(Duration::from_secs(1), Duration::from_secs(3)));
            proxies[target].iter().for_each(Proxy::heal);
        }
        Kind::HiddenRestart => return hidden_restart(&mut servers[target], proxies, rng),
        Kind::DeadWaiters => return dead_waiters(servers, mode, rng),
    }
    String::new()
}

/// Partitions one client from every server, restarts `server` (empty, or from a snapshot that
/// brings back holds since released), and heals the partition about a lease after it began.
fn hidden_restart(server: &mut RedisServer, proxies: &[Vec<Proxy>], rng: &mut Rng) -> String {
    let client = rng.below(proxies.len());
    let from_snapshot = rng.below(2) == 0;
    let began = Instant::now();
    proxies[client].iter().for_each(Proxy::blackhole);
    if from_snapshot {
        let saved = server.cmd(&["SAVE"]);
        assert!(saved.is_ok(), "SAVE: {saved:?}");
        sleep(rng.between(Duration::from_millis(50), Duration::from_millis(400)));
        server.restart_from_files(&[]);
        forget_files(server.dir());
    } else {
        forget_files(server.dir());
        server.restart();
    }
    let partition = rng.between(LEASE * 3 / 4, LEASE * 3 / 2);
    sleep(partition.saturating_sub(began.elapsed()));
    proxies[client].iter().for_each(Proxy::heal);
    let how = if from_snapshot { "a snapshot" } else { "empty" };
    format!(", client {client} partitioned, restarted from {how}")
}

/// Starts a flood process (see `flood.rs`) on the servers, lets it queue its waiters, and kills it.
fn dead_waiters(servers: &[RedisServer], mode: Mode, rng: &mut Rng) -> String {
    let urls: Vec<String> = servers.iter().map(RedisServer::url).collect();
    let mut flood = Command::new(std::env::current_exe().expect("test binary"))
        .env(crate::flood::FLOOD_ENV, urls.join(","))
        .env("CHAOS_MODE", mode.name())
        .stdin(Stdio::piped())
        .spawn()
        .expect("spawn a flood process");
    sleep(rng.between(Duration::from_millis(800), Duration::from_millis(2000)));
    signal(flood.id(), "KILL");
    let _ = flood.wait();
    format!(", {} waiters killed", crate::flood::WAITERS)
}

fn signal(pid: u32, sig: &str) {
    let status = Command::new("kill")
        .arg(format!("-{sig}"))
        .arg(pid.to_string())
        .status()
        .expect("run kill");
    assert!(status.success(), "kill -{sig} {pid}: {status}");
}

/// Removes the snapshot and the AOF from a server's directory, so a restart starts empty.
fn forget_files(dir: &Path) {
    let _ = fs::remove_file(dir.join("dump.rdb"));
    let _ = fs::remove_dir_all(dir.join("appendonlydir"));
}

/// The AOF file that takes the writes now (the highest-numbered `*.incr.aof`).
fn incr_aof(dir: &Path) -> Option<PathBuf> {
    let files = fs::read_dir(dir.join("appendonlydir")).ok()?;
    files
        .filter_map(|f| f.ok().map(|f| f.path()))
        .filter_map(|p| {
            let name = p
                .file_name()?
                .to_str()?
                .strip_suffix(".incr.aof")?
                .to_owned();
            let seq: u64 = name.rsplit('.').next()?.parse().ok()?;
            Some((seq, p))
        })
        .max_by_key(|(seq, _)| *seq)
        .map(|(_, p)| p)
}

/// Turns on an `everysec` AOF, lets it take writes for a while (sampling its size), kills the
/// server, cuts the AOF back to its size a second before the kill, and restarts from it. Says how
/// much it cut.
fn restart_from_cut_aof(server: &mut RedisServer, rng: &mut Rng) -> String {
    assert!(server
        .cmd(&["CONFIG", "SET", "appendfsync", "everysec"])
        .is_ok());
    assert!(server.cmd(&["CONFIG", "SET", "appendonly", "yes"]).is_ok());
    let rewritten = wait_until(Duration::from_secs(10), || {
        let info = server.info("persistence");
        [
            "aof_enabled:1",
            "aof_rewrite_in_progress:0",
            "aof_rewrite_scheduled:0",
        ]
        .iter()
        .all(|field| info.contains(field))
    });
    assert!(rewritten, "the AOF was not written");
    let mut sizes = Vec::new();
    let sampling =
        Instant::now() + rng.between(Duration::from_millis(1500), Duration::from_secs(3));
    while Instant::now() < sampling {
        if let Some(file) = incr_aof(server.dir()) {
            let size = fs::metadata(&file).map(|m| m.len()).unwrap_or(0);
            sizes.push((Instant::now(), file, size));
        }
        sleep(Duration::from_millis(50));
    }
    server.kill();
    let second_ago = Instant::now() - Duration::from_secs(1);
    let mut cut = String::from(", nothing to cut");
    if let Some((_, file, size)) = sizes.iter().rev().find(|(at, ..)| *at <= second_ago) {
        let aof = fs::OpenOptions::new()
            .write(true)
            .open(file)
            .expect("open the AOF");
        let had = aof.metadata().expect("AOF size").len();
        aof.set_len((*size).min(had)).expect("cut the AOF");
        cut = format!(", AOF cut from {had} to {size} bytes");
    }
    server.restart_from_files(&["--appendonly", "yes", "--appendfsync", "everysec"]);
    assert!(server.cmd(&["CONFIG", "SET", "appendonly", "no"]).is_ok());
    cut
}

/// `kind ×n` for each kind that happened.
pub fn summary(faults: &[Fault]) -> String {
    let counts: Vec<String> = Kind::ALL
        .iter()
        .map(|k| (k, faults.iter().filter(|f| f.kind == *k).count()))
        .filter(|(_, n)| *n > 0)
        .map(|(k, n)| format!("{} ×{n}", k.name()))
        .collect();
    format!("{} ({})", faults.len(), counts.join(", "))
}
