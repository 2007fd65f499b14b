//! Real actix-web servers on loopback (their own threads and runtimes, two workers each, as in
//! production), and the bank of [`super`] served by actix.

use std::net::SocketAddr;
use std::sync::Arc;

use actix_web::body::MessageBody;
use actix_web::dev::{ServerHandle, ServiceFactory, ServiceRequest, ServiceResponse};
use actix_web::{web, App, HttpServer};
use tower_lock::actix::LockMiddleware;
use tower_lock::key::{self, KeyExtractor};
use tower_lock::{LockInfo, LockManager};

use super::Bank;

/// A running actix-web server; dropping it stops the server.
pub struct TestServer {
    pub addr: SocketAddr,
    handle: ServerHandle,
}

impl Drop for TestServer {
    fn drop(&mut self) {
        // sends the stop command at once; nothing needs to wait for it
        drop(self.handle.stop(false));
    }
}

/// How to build the server.
#[derive(Clone, Copy)]
pub struct ServerConfig {
    /// actix-web's `h1_allow_half_closed` (its default: true).
    pub half_closed: bool,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig { half_closed: true }
    }
}

/// Serve the apps `factory` builds (one per worker) on a free loopback port.
pub fn serve<F, T, B>(factory: F) -> TestServer
where
    F: Fn() -> App<T> + Send + Clone + 'static,
    T: ServiceFactory<
            ServiceRequest,
            Config = (),
            Response = ServiceResponse<B>,
            Error = actix_web::Error,
            InitError = (),
        > + 'static,
    B: MessageBody + 'static,
{
    serve_with(ServerConfig::default(), factory)
}

/// [`serve`] with a non-default server configuration.
pub fn serve_with<F, T, B>(config: ServerConfig, factory: F) -> TestServer
where
    F: Fn() -> App<T> + Send + Clone + 'static,
    T: ServiceFactory<
            ServiceRequest,
            Config = (),
            Response = ServiceResponse<B>,
            Error = actix_web::Error,
            InitError = (),
        > + 'static,
    B: MessageBody + 'static,
{
    let (started_tx, started) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("server runtime");
        runtime.block_on(async move {
            let server = HttpServer::new(factory)
                .workers(2)
                .disable_signals()
                .h1_allow_half_closed(config.half_closed)
                .bind(("127.0.0.1", 0))
                .expect("bind 127.0.0.1:0");
            let addr = server.addrs()[0];
            let server = server.run();
            started_tx
                .send((addr, server.handle()))
                .expect("report the address");
            server.await.expect("serve");
        });
    });
    let (addr, handle) = started.recv().expect("the server started");
    TestServer { addr, handle }
}

/// `PUT /accounts/{id}`: deposit 1 into the bank with the request's fencing token, answer the new
/// balance; `GET /accounts/{id}`: "read".
pub fn bank_routes(cfg: &mut web::ServiceConfig, bank: Arc<Bank>) {
    async fn deposit(
        bank: web::Data<Arc<Bank>>,
        id: web::Path<u64>,
        info: Option<web::ReqData<LockInfo>>,
    ) -> String {
        let token = info.map(|info| info.fencing_token());
        bank.deposit(id.into_inner(), token).await.to_string()
    }
    cfg.app_data(web::Data::new(bank)).service(
        web::resource("/accounts/{id}")
            .route(web::put().to(deposit))
            .route(web::get().to(|| async { "read" })),
    );
}

/// The middleware the bank tests use: one lock per account named in the path.
pub fn accounts(manager: &LockManager) -> LockMiddleware<impl KeyExtractor + Clone> {
    LockMiddleware::new(manager.clone(), key::pattern("/accounts/{id}"))
}
