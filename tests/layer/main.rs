//! The lock layer (tower, under axum and tonic): through real servers on loopback with the memory
//! backend, as a plain tower service, with metrics, and as replicas sharing a real redis-server.

#[path = "../support/mod.rs"]
mod support;
#[path = "../web/mod.rs"]
mod web;

mod grpc;
mod http_server;
mod lifetimes;
mod plain_service;
#[cfg(feature = "metrics")]
mod recorder;
mod redis_replicas;
