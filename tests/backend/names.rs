//! Connection names: every connection a manager opens (its command pool and its inbox, on one
//! server or on each quorum master) is `tower-lock:<manager id>` in `CLIENT LIST`; a pool the user
//! built keeps the names its owner gave it.

use std::time::Duration;

use tower_lock::{LockManager, LockOptions};

use crate::support::masters::Masters;
use crate::support::RedisServer;

/// `(name, cmd)` of every client of `server` but the one asking.
fn clients(server: &RedisServer) -> Vec<(String, String)> {
    let reply = server.cmd(&["CLIENT", "LIST"]);
    let text = reply.as_string().expect("CLIENT LIST");
    let field = |line: &str, key: &str| {
        let found = line.split(' ').find_map(|f| f.strip_prefix(key));
        found.unwrap_or_default().to_owned()
    };
    (text.lines().filter(|l| !l.trim().is_empty()))
        .map(|line| (field(line, "name="), field(line, "cmd=")))
        .filter(|(_, cmd)| cmd != "client|list")
        .collect()
}

/// How many clients of `server` carry `manager`'s name.
fn named_after(server: &RedisServer, manager: &LockManager) -> usize {
    let name = format!("tower-lock:{}", manager.id());
    clients(server).iter().filter(|(n, _)| *n == name).count()
}

/// Take and release a few locks, so that every command connection is opened.
async fn use_locks(manager: &LockManager) {
    for key in ["a", "b", "c", "d", "e", "f", "g", "h"] {
        let guard = manager.acquire(key, &LockOptions::exclusive()).await;
        guard.expect("acquire").release().await.expect("release");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_connection_of_a_manager_carries_its_name() {
    let server = RedisServer::start();
    let build = || LockManager::builder().redis(server.url()).pool_size(2);
    let (first, second) = (
        build().build().await.unwrap(),
        build().build().await.unwrap(),
    );
    use_locks(&first).await;
    use_locks(&second).await;
    // the id is the one the owners carry
    let held = first.acquire("k", &LockOptions::exclusive()).await.unwrap();
    // a lock taken on the plain path is a string, its holder's id; else a hash of holders
    let kind = server.cmd(&["TYPE", "{tower-lock:k}"]).as_string();
    let owners = if kind.as_deref() == Some("string") {
        vec![server.cmd(&["GET", "{tower-lock:k}"]).as_string().unwrap()]
    } else {
        (server.cmd(&["HKEYS", "{tower-lock:k}"]).as_strings()).unwrap()
    };
    assert!(owners
        .iter()
        .any(|o| o.starts_with(&format!("{}:", first.id()))));
    held.release().await.unwrap();

    assert_ne!(first.id(), second.id());
    // two command connections and the inbox each
    assert_eq!(named_after(&server, &first), 3, "{:?}", clients(&server));
    assert_eq!(named_after(&server, &second), 3, "{:?}", clients(&server));
    assert_eq!(clients(&server).len(), 6, "no connection without a name");
}

/// The command connections are open once the manager is built, before its first command: a burst
/// of requests at start does not wait for them to open within its command timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manager_is_built_with_its_command_connections_open() {
    let server = RedisServer::start();
    let manager = LockManager::builder().redis(server.url()).pool_size(3);
    let manager = manager.build().await.unwrap();
    assert_eq!(
        named_after(&server, &manager),
        4,
        "three command connections and the inbox: {:?}",
        clients(&server)
    );
    assert_eq!(server.command_calls("evalsha"), 0, "no lock was taken");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_users_pool_keeps_its_names_and_the_inbox_takes_ours() {
    let server = RedisServer::start();
    let connections = bb8_redis::RedisConnectionManager::new(server.url()).unwrap();
    let pool = bb8::Pool::builder().max_size(1);
    let pool = pool.build(connections).await.unwrap();
    let manager = LockManager::builder()
        .redis_pool(pool, server.url())
        .build()
        .await
        .unwrap();
    use_locks(&manager).await;
    let all = clients(&server);
    assert_eq!(named_after(&server, &manager), 1, "the inbox: {all:?}");
    let unnamed = all.iter().filter(|(name, _)| name.is_empty()).count();
    assert_eq!(
        unnamed, 1,
        "the user's pooled connection, as built: {all:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_connection_to_every_quorum_master_carries_the_name() {
    let masters = Masters::start(3);
    let manager = masters.manager(Duration::from_secs(30)).await;
    use_locks(&manager).await;
    for server in &masters.servers {
        // the command connection and the inbox
        assert_eq!(named_after(server, &manager), 2, "{:?}", clients(server));
        assert_eq!(clients(server).len(), 2, "no connection without a name");
    }
}
