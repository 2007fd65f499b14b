//! The actix-web middleware through real actix-web servers on loopback (two worker threads each),
//! with the memory backend: what only makes sense on actix-web. The scenarios that are the same on
//! both stacks are in the `layer` binary (`on_both_stacks!`).

#[path = "../support/mod.rs"]
mod support;
#[path = "../web/mod.rs"]
mod web;

mod fail_closed;
mod http_server;
mod lifetimes;
mod max_hold;
