//! A `redis-server` that speaks only TLS, with a CA and a server certificate made for it at run
//! time by the `openssl` command-line tool (standard library only, like the rest of the support).

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use super::free_port;
use super::spawn::{new_temp_dir, read_from, START_ATTEMPTS};

/// How long to wait for a freshly spawned server to be ready.
const STARTUP_TIMEOUT: Duration = Duration::from_secs(10);

/// A TLS-only `redis-server` (`--port 0 --tls-port <free>`, clients not asked for certificates)
/// on `127.0.0.1`, persistence off, with its own temporary directory holding `ca.crt` (a CA of
/// its own, trusted by nobody) and the server certificate it signed (for `127.0.0.1` and
/// `localhost`). Killed and cleaned up on drop.
pub struct TlsRedisServer {
    child: Child,
    port: u16,
    dir: PathBuf,
}

impl TlsRedisServer {
    /// Makes the certificates and starts the server on a free port (another one if that turns
    /// out to be taken), waiting (≤ 10 s) until it accepts connections. Panics with the log.
    pub fn start() -> TlsRedisServer {
        let mut last_err = String::new();
        for _ in 0..START_ATTEMPTS {
            let port = free_port();
            let dir = new_temp_dir(port);
            make_certificates(&dir);
            match spawn(port, &dir) {
                Ok(child) => return TlsRedisServer { child, port, dir },
                Err(Busy(msg)) => last_err = msg,
                Err(Failed(msg)) => {
                    let _ = fs::remove_dir_all(&dir);
                    panic!("support: {msg}");
                }
            }
            let _ = fs::remove_dir_all(&dir);
        }
        panic!("support: no TLS redis-server after {START_ATTEMPTS} ports; last: {last_err}");
    }

    /// The TLS port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `rediss://127.0.0.1:PORT`: verifies the certificate against the system's roots.
    pub fn url(&self) -> String {
        format!("rediss://127.0.0.1:{}", self.port)
    }

    /// `rediss://127.0.0.1:PORT/#insecure`: accepts any certificate.
    pub fn insecure_url(&self) -> String {
        format!("{}/#insecure", self.url())
    }

    /// The PEM of the CA that signed the server's certificate.
    pub fn ca_pem(&self) -> Vec<u8> {
        fs::read(self.dir.join("ca.crt")).expect("support: read ca.crt")
    }

    /// The server log so far.
    pub fn log(&self) -> String {
        read_from(&self.dir.join("redis.log"), 0)
    }
}

impl Drop for TlsRedisServer {
    /// Kills (SIGKILL) and reaps the server and removes its directory; never panics.
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = fs::remove_dir_all(&self.dir);
    }
}

/// Runs `openssl` in `dir`; panics with its output when it fails or is missing.
fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "support: cannot run `openssl` ({e}); install it, e.g. `apt-get install openssl`"
            )
        });
    assert!(
        out.status.success(),
        "support: openssl {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Writes `ca.crt` / `ca.key` (a CA) and `server.crt` / `server.key` (signed by it, for
/// 127.0.0.1 and localhost) into `dir`. P-256 keys: quick to make, and what rustls verifies.
fn make_certificates(dir: &Path) {
    fs::create_dir_all(dir).expect("support: create the server's directory");
    let key = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
    ];
    let mut ca = vec![
        "req",
        "-x509",
        "-days",
        "2",
        "-subj",
        "/CN=tower-lock test CA",
    ];
    ca.extend(key);
    ca.extend(["-keyout", "ca.key", "-out", "ca.crt"]);
    ca.extend(["-addext", "basicConstraints=critical,CA:TRUE"]);
    ca.extend(["-addext", "keyUsage=critical,keyCertSign,cRLSign"]);
    openssl(dir, &ca);
    let mut csr = vec!["req", "-new", "-subj", "/CN=localhost"];
    csr.extend(key);
    csr.extend(["-keyout", "server.key", "-out", "server.csr"]);
    openssl(dir, &csr);
    let ext = "subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\n\
               keyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n";
    fs::write(dir.join("server.ext"), ext).expect("support: write server.ext");
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-days",
            "2",
            "-in",
            "server.csr",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-extfile",
            "server.ext",
            "-out",
            "server.crt",
        ],
    );
}

/// Why a spawn failed.
enum SpawnError {
    Busy(String),
    Failed(String),
}
use SpawnError::{Busy, Failed};

/// Starts the server on TLS port `port` and waits until its log says it is ready.
fn spawn(port: u16, dir: &Path) -> Result<Child, SpawnError> {
    let log = dir.join("redis.log");
    let file = |name: &str| dir.join(name).display().to_string();
    let mut child = Command::new("redis-server")
        .args(["--port", "0", "--tls-port", &port.to_string()])
        .args(["--tls-cert-file", &file("server.crt")])
        .args(["--tls-key-file", &file("server.key")])
        .args(["--tls-ca-cert-file", &file("ca.crt")])
        .args(["--tls-auth-clients", "no"])
        .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
        .args(["--dir", &dir.display().to_string()])
        .args(["--logfile", &log.display().to_string()])
        .args(["--daemonize", "no", "--protected-mode", "no"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("support: cannot run `redis-server` ({e})"));
    let deadline = Instant::now() + STARTUP_TIMEOUT;
    loop {
        let text = read_from(&log, 0);
        if let Ok(Some(status)) = child.try_wait() {
            let msg = format!("TLS redis-server on {port} exited ({status}):\n{text}");
            let busy = text.contains("Address already in use");
            return Err(if busy { Busy(msg) } else { Failed(msg) });
        }
        if text.contains("Ready to accept connections") {
            return Ok(child);
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Err(Failed(format!(
                "TLS redis-server on {port} not ready:\n{text}"
            )));
        }
        thread::sleep(Duration::from_millis(20));
    }
}
