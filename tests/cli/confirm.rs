//! `release --force` on a terminal: it shows the lock, asks `[y/N]`, and only `y` releases.

use tower_lock::DEFAULT_LEASE;

use crate::run::args;
use crate::scene::{Scene, KEY};
use crate::support::fixture::Fixture;
use crate::tmux::Terminal;

const QUESTION: &str = "[y/N]";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn release_asks_and_only_yes_releases() {
    let fx = Fixture::redis();
    let scene = Scene::contended(&fx, DEFAULT_LEASE).await;

    let terminal = Terminal::run_tool(&args(&fx, &["release", KEY, "--force"]));
    let screen = terminal
        .screen_when("the question", |s| s.contains(QUESTION))
        .await;
    assert!(
        screen.contains(scene.holder.id()),
        "it shows the holder first:\n{screen}"
    );
    terminal.send(&["n", "Enter"]);
    let (code, screen) = terminal.finished().await;
    assert_eq!(code, 1, "declined:\n{screen}");
    assert!(screen.contains(&format!("{KEY} not released")), "{screen}");
    let state = scene.holder.inspect(KEY).await.expect("inspect");
    assert_eq!(
        state.holders[0].manager,
        scene.holder.id(),
        "still held: {state:?}"
    );
    assert!(!scene.guard.is_lost());

    let terminal = Terminal::run_tool(&args(&fx, &["release", KEY, "--force"]));
    terminal
        .screen_when("the question", |s| s.contains(QUESTION))
        .await;
    terminal.send(&["y", "Enter"]);
    let (code, screen) = terminal.finished().await;
    assert_eq!(code, 0, "{screen}");
    assert!(screen.contains(&format!("released {KEY}")), "{screen}");
    let state = crate::scene::state_when(&scene.holder, KEY, |s| {
        s.holders
            .first()
            .is_some_and(|h| h.manager == scene.layer.id())
    })
    .await;
    assert_eq!(
        state.holders[0].manager,
        scene.layer.id(),
        "the next waiter: {state:?}"
    );
    scene.finish().await;
}
