//! `watch` in a real terminal (tmux, 160×40): the screen shows the lock, its holder and its queue
//! in order; `q` or Ctrl-C ends it with exit code 0 and gives the shell its screen back in cooked
//! mode. A Redis outage shows as an error in place of the table, until Redis is back. Without a
//! terminal it prints a table a second until it is told to stop.

use std::process::Stdio;

use tokio::io::{AsyncBufReadExt, BufReader};
use tower_lock::{LockManager, LockOptions, DEFAULT_LEASE};

use crate::read::table_name;
use crate::run::{args, BIN};
use crate::scene::{Scene, KEY};
use crate::support::fixture::Fixture;
use crate::support::{RedisServer, GENEROUS};
use crate::tmux::Terminal;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_shows_the_holder_and_the_queue_and_quits_on_q() {
    watch_until(&["q"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_quits_on_control_c_too() {
    watch_until(&["C-c"]).await;
}

/// Watch the contended lock, check the screen, and press `keys`.
async fn watch_until(keys: &[&str]) {
    let fx = Fixture::redis();
    let scene = Scene::contended(&fx, DEFAULT_LEASE).await;
    let state = scene.holder.inspect(KEY).await.expect("inspect");
    let holder = table_name(state.holders[0].label.as_deref(), &state.holders[0].manager);
    let waiters: Vec<String> = (state.waiters.iter())
        .map(|w| table_name(w.label.as_deref(), &w.manager))
        .collect();

    let terminal = Terminal::run_tool(&args(&fx, &["watch", "accounts/"]));
    let screen = terminal
        .screen_when("the lock, its holder and its queue in order", |screen| {
            screen.contains("tower-lock watch")
                && screen
                    .lines()
                    .any(|l| l.starts_with(KEY) && l.contains(&holder))
                && screen.contains(&format!("1. {} fair", waiters[0]))
                && screen.contains(&format!("2. {} fair", waiters[1]))
        })
        .await;
    let row = screen
        .lines()
        .find(|l| l.starts_with(KEY))
        .unwrap_or_default();
    let cells: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(
        (cells.get(1), cells.get(6)),
        (Some(&"fair"), Some(&"2")),
        "{row}"
    );

    terminal.send(keys);
    let (code, screen) = terminal.finished().await;
    assert_eq!(code, 0, "{screen}");
    assert!(
        !screen.contains("OLDEST WAIT"),
        "the table was on the alternate screen:\n{screen}"
    );
    scene.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_terminal_watch_prints_tables_until_interrupted() {
    let fx = Fixture::redis();
    let scene = Scene::contended(&fx, DEFAULT_LEASE).await;
    let mut child = tokio::process::Command::new(BIN)
        .args(args(&fx, &["watch"]))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let (mut titles, mut row) = (0, None);
    let read = tokio::time::timeout(GENEROUS, async {
        // two tables: it goes on after the first
        while titles < 2 {
            let line = lines.next_line().await.expect("read").expect("a line");
            titles += usize::from(line.starts_with("tower-lock watch"));
            // the table's row, not the queue's line under it
            if titles == 1 && line.starts_with(KEY) && !line.contains("<-") {
                row = Some(line);
            }
        }
    });
    read.await.expect("two tables");
    let row = row.expect("the first table shows the lock");
    assert_eq!(row.split_whitespace().nth(6), Some("2"), "{row}");
    let pid = child.id().expect("pid").to_string();
    let signalled = std::process::Command::new("kill")
        .args(["-INT", &pid])
        .status();
    assert!(signalled.expect("kill").success());
    let status = tokio::time::timeout(GENEROUS, child.wait())
        .await
        .expect("it stops")
        .expect("wait");
    assert_eq!(status.code(), Some(0), "{status:?}");
    scene.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_outlives_an_outage_and_never_shows_a_stale_table() {
    let mut server = RedisServer::start();
    let holder = LockManager::redis(&server.url()).await.expect("manager");
    let guard = holder
        .acquire("accounts/1", &LockOptions::exclusive())
        .await
        .expect("hold");
    let url = server.url();
    let args: Vec<String> = ["--redis", &url, "--timeout", "0.5", "watch", "accounts/"]
        .map(str::to_owned)
        .to_vec();
    let terminal = Terminal::run_tool(&args);
    terminal
        .screen_when("the held lock", |s| {
            s.lines().any(|l| l.starts_with("accounts/1 "))
        })
        .await;

    server.kill();
    let down = format!("cannot reach Redis at {}", server.url());
    let screen = terminal
        .screen_when("the outage", |s| s.contains(&down))
        .await;
    assert!(
        !screen.contains("OLDEST WAIT"),
        "no table while Redis is down:\n{screen}"
    );

    // a server that lost every key: the lock is gone, and watch says so
    server.restart();
    terminal
        .screen_when("the server back", |s| {
            s.contains("no lock under \"accounts/\" is held or waited for")
        })
        .await;
    terminal.send(&["q"]);
    assert_eq!(terminal.finished().await.0, 0);
    drop(guard);
}
