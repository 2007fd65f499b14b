//! Raw client connections that close the way real clients do, and a flag that shows a drop.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

/// Sets its flag when dropped: proves that a handler's future was dropped.
pub struct DropFlag(pub Arc<AtomicBool>);

impl Drop for DropFlag {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// Open a connection and send a request on it; dropping the connection closes it (FIN).
pub async fn send_raw(addr: SocketAddr, method: &str, path: &str) -> TcpStream {
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    let request = format!("{method} {path} HTTP/1.1\r\nhost: test\r\ncontent-length: 0\r\n\r\n");
    stream
        .write_all(request.as_bytes())
        .await
        .expect("write request");
    stream
}

/// Drop the connection the way a crashed or impatient client does: with a reset (RST).
pub fn reset(connection: TcpStream) {
    #[allow(deprecated)] // SO_LINGER 0 blocks nothing: it makes close() send RST at once
    connection
        .set_linger(Some(Duration::ZERO))
        .expect("SO_LINGER 0");
    drop(connection);
}
