//! The `tower-lock` command-line tool, run as a process against real servers this test starts (a
//! redis-server, and with the feature `cluster` a Redis Cluster): `list`, `show --json`, `release
//! --force` and `watch` (driven in tmux) see the holder and the waiters that managers of this
//! process keep, `--sentinel` and `rediss://` reach their servers, and a wrong command line or a
//! dead server gives the exit code a shell expects.

#[path = "../support/mod.rs"]
mod support;

mod confirm;
mod errors;
mod read;
mod release;
mod run;
mod scene;
mod targets;
mod tmux;
mod watch;

/// Run each named `async fn(Fixture)` on its own redis-server and (feature `cluster`) on its own
/// Redis Cluster; the tool cannot reach a memory manager.
#[macro_export]
macro_rules! on_redis_and_cluster {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn redis() {
                super::$name($crate::support::fixture::Fixture::redis()).await;
            }

            #[cfg(feature = "cluster")]
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn cluster() {
                super::$name($crate::support::fixture::Fixture::cluster()).await;
            }
        }
    )*};
}
