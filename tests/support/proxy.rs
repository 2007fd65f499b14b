//! A TCP proxy that injects network faults between a client and a server on loopback.
//!
//! Point a client at [`Proxy::url`] instead of the server's URL; at any time the test can slow
//! every byte down ([`Proxy::set_delay`]), stop forwarding ([`Proxy::blackhole`]), close every
//! connection ([`Proxy::cut`]) and go back to plain forwarding ([`Proxy::heal`]). Standard library
//! only (a few threads per connection), like the rest of `support`.

use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread;
use std::time::{Duration, Instant};

use super::free_port;

/// A TCP proxy from a free loopback port to `127.0.0.1:<target>`. Dropping it stops accepting and
/// closes every connection.
pub struct Proxy {
    port: u16,
    shared: Arc<Shared>,
    acceptor: Option<thread::JoinHandle<()>>,
}

struct Shared {
    target: u16,
    faults: Mutex<Faults>,
    /// Told when the blackhole is lifted.
    healed: Condvar,
    stopped: AtomicBool,
    next_id: AtomicU64,
}

struct Faults {
    delay: Duration,
    blackhole: bool,
    /// Both ends of every open connection, by id, to cut them.
    conns: Vec<(u64, TcpStream, TcpStream)>,
}

impl Shared {
    fn faults(&self) -> MutexGuard<'_, Faults> {
        self.faults.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Wait while the proxy partitions (until healed or stopped).
    fn wait_healed(&self) {
        let mut faults = self.faults();
        while faults.blackhole && !self.stopped.load(Ordering::SeqCst) {
            faults = self.healed.wait(faults).unwrap_or_else(|p| p.into_inner());
        }
    }

    fn close(&self, id: u64) {
        let mut faults = self.faults();
        if let Some(at) = faults.conns.iter().position(|c| c.0 == id) {
            let (_, client, server) = faults.conns.swap_remove(at);
            let _ = client.shutdown(Shutdown::Both);
            let _ = server.shutdown(Shutdown::Both);
        }
    }
}

impl Proxy {
    /// Start forwarding a free loopback port to `127.0.0.1:<target_port>`.
    pub fn start(target_port: u16) -> Proxy {
        let (listener, port) = (0..100)
            .find_map(|_| {
                let port = free_port();
                TcpListener::bind((Ipv4Addr::LOCALHOST, port))
                    .ok()
                    .map(|l| (l, port))
            })
            .expect("support::proxy: no free port to listen on");
        let shared = Arc::new(Shared {
            target: target_port,
            faults: Mutex::new(Faults {
                delay: Duration::ZERO,
                blackhole: false,
                conns: Vec::new(),
            }),
            healed: Condvar::new(),
            stopped: AtomicBool::new(false),
            next_id: AtomicU64::new(0),
        });
        let acceptor = thread::spawn({
            let shared = shared.clone();
            move || accept(listener, shared)
        });
        Proxy {
            port,
            shared,
            acceptor: Some(acceptor),
        }
    }

    /// The port the proxy listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// A Redis URL through the proxy, `redis://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Forward every chunk read from now on, in either direction, `delay` after it was read: a
    /// round trip through the proxy takes `2 * delay` more. Latency only: chunks in flight do not
    /// wait for one another, and their order is kept.
    pub fn set_delay(&self, delay: Duration) {
        self.shared.faults().delay = delay;
    }

    /// Stop forwarding, connections kept open (new ones are accepted, and forward nothing
    /// either): a partition. What is sent meanwhile is held, and delivered on [`heal`](Self::heal),
    /// as TCP would retransmit it; so is a close: a connection the server closes meanwhile (it
    /// died, or restarted) looks open to the client until the heal. A new connection reaches the
    /// server only on the heal.
    pub fn blackhole(&self) {
        self.shared.faults().blackhole = true;
    }

    /// Close every current connection, both ways (later ones are accepted as usual).
    pub fn cut(&self) {
        let conns = std::mem::take(&mut self.shared.faults().conns);
        for (_, client, server) in conns {
            let _ = client.shutdown(Shutdown::Both);
            let _ = server.shutdown(Shutdown::Both);
        }
    }

    /// Forward as usual again: no delay, no blackhole (what it held goes on now).
    pub fn heal(&self) {
        let mut faults = self.shared.faults();
        faults.delay = Duration::ZERO;
        faults.blackhole = false;
        self.shared.healed.notify_all();
    }
}

impl Drop for Proxy {
    /// Stop accepting, cut every connection, and lift the blackhole so that no thread waits on.
    fn drop(&mut self) {
        self.shared.stopped.store(true, Ordering::SeqCst);
        // wake the threads waiting for a heal
        self.heal();
        // wake the acceptor, blocked in accept()
        let _ = TcpStream::connect((Ipv4Addr::LOCALHOST, self.port));
        if let Some(acceptor) = self.acceptor.take() {
            let _ = acceptor.join();
        }
        self.cut();
        self.heal();
    }
}

fn accept(listener: TcpListener, shared: Arc<Shared>) {
    for client in listener.incoming() {
        if shared.stopped.load(Ordering::SeqCst) {
            return;
        }
        let Ok(client) = client else { continue };
        // a partition holds the new connection's way to the server too
        shared.wait_healed();
        if shared.stopped.load(Ordering::SeqCst) {
            return;
        }
        let Ok(server) = TcpStream::connect((Ipv4Addr::LOCALHOST, shared.target)) else {
            continue; // the client sees its connection closed, as if refused
        };
        let _ = (client.set_nodelay(true), server.set_nodelay(true));
        let id = shared.next_id.fetch_add(1, Ordering::Relaxed);
        let ends = (client.try_clone(), server.try_clone());
        let (Ok(client_end), Ok(server_end)) = ends else {
            continue;
        };
        shared.faults().conns.push((id, client_end, server_end));
        for (from, to) in [(&client, &server), (&server, &client)] {
            let (Ok(from), Ok(to)) = (from.try_clone(), to.try_clone()) else {
                shared.close(id);
                break;
            };
            pump(from, to, id, shared.clone());
        }
    }
}

/// Forward `from` to `to` (one direction of connection `id`): a reader thread stamps each chunk
/// with the time it is due, a writer thread sends it then. Once `from` is closed and what it sent
/// is forwarded (or `to` fails), the whole connection is closed.
fn pump(mut from: TcpStream, mut to: TcpStream, id: u64, shared: Arc<Shared>) {
    let (chunks, due) = mpsc::channel::<(Instant, Vec<u8>)>();
    let reader_shared = shared.clone();
    thread::spawn(move || {
        let mut buf = vec![0; 64 * 1024];
        while let Ok(n @ 1..) = from.read(&mut buf) {
            let at = Instant::now() + reader_shared.faults().delay;
            if chunks.send((at, buf[..n].to_vec())).is_err() {
                break;
            }
        }
    });
    thread::spawn(move || {
        let forwarded = due.iter().try_for_each(|(at, chunk)| {
            thread::sleep(at.saturating_duration_since(Instant::now()));
            shared.wait_healed();
            to.write_all(&chunk)
        });
        let _: io::Result<()> = forwarded;
        // a close, like the bytes before it, goes through a partition only when it heals
        shared.wait_healed();
        shared.close(id);
    });
}
