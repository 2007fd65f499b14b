//! Quorum (RedLock) acquire + release latency against one Redis server, on the same machine.
//!
//! ```text
//! cargo bench --bench quorum        # starts five throwaway redis-server processes
//! ```
//!
//! The target is "about the slowest master's round trip, not the sum of all": a quorum attempt asks
//! every master at once. Every sample round measures, in a rotating order so that each kind sees the
//! same machine at the same moment (this matters on a small, noisy VM):
//!
//! - one PING to one server, and one PING to each of 3 (and 5) servers sent at once (the time until
//!   the slowest answers);
//! - the same with a tiny Lua script (EVALSHA of `TIME`): every lock command is one script call,
//!   and on one small machine the servers' processes compete for the same cores, so "2 x script on
//!   3 at once" is the floor a quorum acquire + release can reach here;
//! - uncontended acquire + release on one server (single-node manager), and on quorums of 3 and 5.
//!
//! It prints medians and p99s, and the ratios quorum / single-node and quorum / parallel PING.

#[path = "../tests/support/mod.rs"]
mod support;

use support::stats::{median, p99, ratio};

use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, Instant};

use futures_util::future::join_all;
use tower_lock::{LockManager, LockOptions};

const WARMUP: usize = 200;
const SAMPLES: usize = 2000;

type Probe<'a> = Box<dyn Fn() -> Pin<Box<dyn Future<Output = ()> + 'a>> + 'a>;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let servers: Vec<support::RedisServer> =
        (0..5).map(|_| support::RedisServer::start()).collect();
    let urls: Vec<String> = servers.iter().map(|s| s.url()).collect();
    let mut conns = Vec::new();
    for url in &urls {
        let client = redis::Client::open(url.as_str())?;
        conns.push(client.get_multiplexed_async_connection().await?);
    }
    let single = LockManager::redis(&urls[0]).await?;
    let quorum3 = LockManager::quorum(urls[..3].to_vec()).await?;
    let quorum5 = LockManager::quorum(urls.clone()).await?;
    let opts = LockOptions::exclusive();

    let cycle = |m: &LockManager| {
        let m = m.clone();
        async move {
            let g = m.acquire("bench:quorum", &opts).await.expect("acquire");
            g.release().await.expect("release");
        }
    };
    let script = redis::Script::new("return redis.call('TIME')");
    let probes: Vec<(&str, Probe<'_>)> = vec![
        (
            "PING, one server",
            Box::new(|| Box::pin(ping_all(&conns[..1]))),
        ),
        (
            "PING, 3 at once (slowest)",
            Box::new(|| Box::pin(ping_all(&conns[..3]))),
        ),
        (
            "PING, 5 at once (slowest)",
            Box::new(|| Box::pin(ping_all(&conns[..5]))),
        ),
        (
            "script, one server",
            Box::new(|| Box::pin(script_all(&script, &conns[..1]))),
        ),
        (
            "script, 3 at once (slowest)",
            Box::new(|| Box::pin(script_all(&script, &conns[..3]))),
        ),
        (
            "script, 5 at once (slowest)",
            Box::new(|| Box::pin(script_all(&script, &conns[..5]))),
        ),
        (
            "single-node acquire+release",
            Box::new(|| Box::pin(cycle(&single))),
        ),
        (
            "quorum of 3 acquire+release",
            Box::new(|| Box::pin(cycle(&quorum3))),
        ),
        (
            "quorum of 5 acquire+release",
            Box::new(|| Box::pin(cycle(&quorum5))),
        ),
    ];
    let mut samples: Vec<Vec<Duration>> = vec![Vec::with_capacity(SAMPLES); probes.len()];
    for round in 0..WARMUP + SAMPLES {
        for k in 0..probes.len() {
            let which = (round + k) % probes.len();
            let started = Instant::now();
            (probes[which].1)().await;
            if round >= WARMUP {
                samples[which].push(started.elapsed());
            }
        }
    }

    println!("quorum latency, {SAMPLES} interleaved samples each (after {WARMUP} warm-up rounds)");
    println!("{:<36} {:>10} {:>10}", "", "median", "p99");
    for ((name, _), s) in probes.iter().zip(&samples) {
        println!("{name:<36} {:>10.1?} {:>10.1?}", median(s), p99(s));
    }
    let m: Vec<Duration> = samples.iter().map(|s| median(s)).collect();
    let [ping1, ping3, ping5, script1, script3, script5, single, q3, q5] = m[..] else {
        unreachable!("nine probes");
    };
    // acquire + release = two rounds of one script call to every server
    println!("ratios of medians (acquire + release = 2 rounds of script calls):");
    println!(
        "  quorum of 3 / single-node           {:.2}",
        ratio(q3, single)
    );
    println!(
        "  quorum of 5 / single-node           {:.2}",
        ratio(q5, single)
    );
    println!(
        "  single-node / 2 x script on 1       {:.2}",
        ratio(single, script1 * 2)
    );
    println!(
        "  quorum of 3 / 2 x script on 3       {:.2}",
        ratio(q3, script3 * 2)
    );
    println!(
        "  quorum of 5 / 2 x script on 5       {:.2}",
        ratio(q5, script5 * 2)
    );
    println!(
        "  single-node / 2 x PING              {:.2}",
        ratio(single, ping1 * 2)
    );
    println!(
        "  quorum of 3 / 2 x PING to 3         {:.2}",
        ratio(q3, ping3 * 2)
    );
    println!(
        "  quorum of 5 / 2 x PING to 5         {:.2}",
        ratio(q5, ping5 * 2)
    );
    drop(servers);
    Ok(())
}

/// PING every connection at once; done when the slowest answers.
async fn ping_all(conns: &[redis::aio::MultiplexedConnection]) {
    join_all(conns.iter().map(|c| {
        let mut c = c.clone();
        async move {
            let _: String = redis::cmd("PING").query_async(&mut c).await.expect("PING");
        }
    }))
    .await;
}

/// Run `script` on every connection at once; done when the slowest answers.
async fn script_all(script: &redis::Script, conns: &[redis::aio::MultiplexedConnection]) {
    join_all(conns.iter().map(|c| {
        let mut c = c.clone();
        async move {
            let _: Vec<String> = script.invoke_async(&mut c).await.expect("script");
        }
    }))
    .await;
}
