//! The lock layer (tower, under axum and tonic): through real servers on loopback with the memory
//! backend, as a plain tower service, with metrics, and as replicas sharing a real redis-server.
//! The web scenarios that are the same on actix-web are written once against `web::stacks::Stack`
//! and run on both stacks (`on_both_stacks!`; the actix-web runs with the feature `actix`).

#[path = "../support/mod.rs"]
mod support;
#[path = "../web/mod.rs"]
mod web;

#[cfg(feature = "axum")]
mod axum_params;
#[cfg(feature = "axum")]
mod axum_router;
mod fail_closed;
mod grpc;
mod http_server;
mod lifetimes;
mod plain_service;
#[cfg(feature = "metrics")]
mod recorder;
mod redis_replicas;
mod shared_locks;
mod spans;
