//! One web scenario, two stacks: the tower layer under axum ([`Layer`]) and the actix-web
//! middleware ([`Actix`]) serve the same apps behind the same [`RequestOptions`], so a scenario
//! that sends the same requests and expects the same answers on both is written once, generic over
//! [`Stack`], and run on each by [`on_both_stacks!`](crate::on_both_stacks).

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;

use axum::http::StatusCode;
use tokio::sync::mpsc::UnboundedReceiver;
use tokio::sync::Mutex;
use tower_lock::{LockManager, LockOptions, RequestOptions};

use super::Bank;

/// A handler both stacks can serve: its answer's status and body.
pub type Handler =
    Arc<dyn Fn() -> Pin<Box<dyn Future<Output = (StatusCode, String)> + Send>> + Send + Sync>;

/// Wrap an async closure as a [`Handler`].
pub fn handler<F, Fut>(f: F) -> Handler
where
    F: Fn() -> Fut + Send + Sync + 'static,
    Fut: Future<Output = (StatusCode, String)> + Send + 'static,
{
    Arc::new(move || Box::pin(f()))
}

/// The end of a streamed body: the stream sends its last chunk once this receives.
pub type Finish = Arc<Mutex<UnboundedReceiver<()>>>;

/// A running server of either stack; dropping it stops an actix-web server (an axum server runs
/// until the test's runtime ends).
pub struct Server {
    pub addr: SocketAddr,
    /// The lock options of the layer or middleware the server was built with.
    pub lock_options: LockOptions,
    _running: Option<Box<dyn std::any::Any>>,
}

/// A web stack with the lock middleware in front of its apps.
pub trait Stack {
    /// The bank (`PUT /accounts/{id}` deposits, `GET` answers "read") behind one lock per account
    /// named in the path (`key::pattern("/accounts/{id}")`) with `options`.
    fn bank(
        manager: &LockManager,
        options: RequestOptions,
        bank: &Arc<Bank>,
    ) -> impl Future<Output = Server>;

    /// `handler` answers every request, behind one lock per account named in the path with
    /// `options`.
    fn handler(
        manager: &LockManager,
        options: RequestOptions,
        handler: Handler,
    ) -> impl Future<Output = Server>;

    /// `GET /stream/{id}` streams "first " and, once `finish` receives, "last", holding its lock
    /// (`stream/{id}`) until the body ends; `GET /plain/{id}` answers "plain" under a lock
    /// (`plain/{id}`) released with the response head.
    fn streams(manager: &LockManager, finish: Finish) -> impl Future<Output = Server>;
}

/// The tower layer under axum, served on the test's runtime.
pub struct Layer;

impl Stack for Layer {
    async fn bank(manager: &LockManager, options: RequestOptions, bank: &Arc<Bank>) -> Server {
        let layer = super::accounts(manager).request_options(options);
        let lock_options = layer.lock_options();
        let addr = super::serve(super::bank_routes(bank.clone()).layer(layer)).await;
        Server {
            addr,
            lock_options,
            _running: None,
        }
    }

    async fn handler(manager: &LockManager, options: RequestOptions, handler: Handler) -> Server {
        let layer = super::accounts(manager).request_options(options);
        let lock_options = layer.lock_options();
        let app = axum::Router::new()
            .fallback(move || {
                let handler = handler.clone();
                async move { handler().await }
            })
            .layer(layer);
        Server {
            addr: super::serve(app).await,
            lock_options,
            _running: None,
        }
    }

    async fn streams(manager: &LockManager, finish: Finish) -> Server {
        use axum::routing::get;
        use futures_util::StreamExt;
        use tower_lock::{key, LockLayer};

        let streaming = move || {
            let finish = finish.clone();
            async move {
                let first = futures_util::stream::once(async {
                    Ok::<_, std::convert::Infallible>(bytes::Bytes::from("first "))
                });
                let last = futures_util::stream::once(async move {
                    finish.lock().await.recv().await;
                    Ok::<_, std::convert::Infallible>(bytes::Bytes::from("last"))
                });
                axum::body::Body::from_stream(first.chain(last))
            }
        };
        let held_through_body =
            LockLayer::new(manager.clone(), key::pattern("/stream/{id}")).hold_until_body_end();
        let lock_options = held_through_body.lock_options();
        let held_through_body = axum::Router::new()
            .route("/stream/{id}", get(streaming))
            .layer(held_through_body);
        let head_only = axum::Router::new()
            .route("/plain/{id}", get(|| async { "plain" }))
            .layer(LockLayer::new(manager.clone(), key::pattern("/plain/{id}")));
        Server {
            addr: super::serve(held_through_body.merge(head_only)).await,
            lock_options,
            _running: None,
        }
    }
}

/// The actix-web middleware, on an actix-web server of its own (two workers, its own threads).
#[cfg(feature = "actix")]
pub struct Actix;

#[cfg(feature = "actix")]
impl Stack for Actix {
    async fn bank(manager: &LockManager, options: RequestOptions, bank: &Arc<Bank>) -> Server {
        use actix_web::App;

        // built once and cloned into every worker: one middleware (and limit) for the whole server
        let locks = super::actix::accounts(manager).request_options(options);
        let lock_options = locks.lock_options();
        let bank = bank.clone();
        let server = super::actix::serve(move || {
            App::new()
                .wrap(locks.clone())
                .configure(|cfg| super::actix::bank_routes(cfg, bank.clone()))
        });
        Server {
            addr: server.addr,
            lock_options,
            _running: Some(Box::new(server)),
        }
    }

    async fn handler(manager: &LockManager, options: RequestOptions, handler: Handler) -> Server {
        use actix_web::{web, App, HttpResponse};

        let locks = super::actix::accounts(manager).request_options(options);
        let lock_options = locks.lock_options();
        let server = super::actix::serve(move || {
            let handler = handler.clone();
            App::new()
                .wrap(locks.clone())
                .default_service(web::to(move || {
                    let handler = handler.clone();
                    async move {
                        let (status, body) = handler().await;
                        let status = actix_web::http::StatusCode::from_u16(status.as_u16())
                            .expect("a valid status");
                        HttpResponse::build(status).body(body)
                    }
                }))
        });
        Server {
            addr: server.addr,
            lock_options,
            _running: Some(Box::new(server)),
        }
    }

    async fn streams(manager: &LockManager, finish: Finish) -> Server {
        use actix_web::{web, App, HttpResponse};
        use tower_lock::actix::LockMiddleware;
        use tower_lock::key;

        let streaming = move || {
            let finish = finish.clone();
            async move {
                let first = futures_util::stream::once(async {
                    Ok::<_, std::convert::Infallible>(bytes::Bytes::from("first "))
                });
                let last = futures_util::stream::once(async move {
                    finish.lock().await.recv().await;
                    Ok::<_, std::convert::Infallible>(bytes::Bytes::from("last"))
                });
                HttpResponse::Ok().streaming(futures_util::StreamExt::chain(first, last))
            }
        };
        let held_through_body = LockMiddleware::new(manager.clone(), key::pattern("/stream/{id}"))
            .hold_until_body_end();
        let lock_options = held_through_body.lock_options();
        let head_only = LockMiddleware::new(manager.clone(), key::pattern("/plain/{id}"));
        let server = super::actix::serve(move || {
            App::new()
                .service(
                    web::resource("/stream/{id}")
                        .wrap(held_through_body.clone())
                        .route(web::get().to(streaming.clone())),
                )
                .service(
                    web::resource("/plain/{id}")
                        .wrap(head_only.clone())
                        .route(web::get().to(|| async { "plain" })),
                )
        });
        Server {
            addr: server.addr,
            lock_options,
            _running: Some(Box::new(server)),
        }
    }
}

/// Run each named `async fn<S: Stack>()` on both stacks: one `#[test]` per stack (`layer`, and
/// `actix` with the feature `actix`) in a module named after the scenario.
#[macro_export]
macro_rules! on_both_stacks {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn layer() {
                super::$name::<$crate::web::stacks::Layer>().await;
            }

            #[cfg(feature = "actix")]
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn actix() {
                super::$name::<$crate::web::stacks::Actix>().await;
            }
        }
    )*};
}
