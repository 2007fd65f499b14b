//! The actix-web middleware through real actix-web servers on loopback (two worker threads each):
//! with the memory backend, and as replicas sharing a real redis-server.

#[path = "../support/mod.rs"]
mod support;
#[path = "../web/mod.rs"]
mod web;

mod http_server;
mod lifetimes;
mod redis_replicas;
