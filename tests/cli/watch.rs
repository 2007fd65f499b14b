//! `watch` in a real terminal: tmux runs it on a 160×40 screen, the test reads the screen back
//! (the lock, its holder, the queue in order), presses `q`, and finds the shell's screen again
//! with the tool's exit code.

use std::process::{Command, Output};

use tower_lock::DEFAULT_LEASE;

use crate::read::table_name;
use crate::run::{target, BIN};
use crate::scene::{Scene, KEY};
use crate::support::fixture::Fixture;
use crate::support::{eventually, GENEROUS};

/// One tmux server of this test's own (its own socket), killed on drop.
struct Tmux {
    socket: String,
}

impl Tmux {
    fn run(&self, args: &[&str]) -> Output {
        Command::new("tmux")
            .args(["-L", &self.socket])
            .args(args)
            .output()
            .expect("tmux (apt-get install tmux; scripts/test.sh installs it)")
    }

    /// The text on the session's screen now.
    fn screen(&self) -> String {
        String::from_utf8_lossy(&self.run(&["capture-pane", "-p", "-t", "watch"]).stdout)
            .into_owned()
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.run(&["kill-server"]);
    }
}

/// `text` quoted for the shell tmux runs the command with.
fn quoted(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_shows_the_holder_and_the_queue_and_quits_on_q() {
    let fx = Fixture::redis();
    let scene = Scene::contended(&fx, DEFAULT_LEASE).await;
    let mut words = vec![quoted(BIN)];
    words.extend(target(&fx).iter().map(|arg| quoted(arg)));
    words.extend(["watch".to_owned(), quoted("accounts/")]);
    let shell = format!(
        "{}; echo \"watch exited with $?\"; \
         stty -a | grep -q -- ' icanon' && echo 'the terminal is in cooked mode'; \
         echo 'the shell is done'; sleep 60",
        words.join(" ")
    );
    let tmux = Tmux {
        socket: format!("tower-lock-cli-{}", std::process::id()),
    };
    let started = tmux.run(&[
        "new-session",
        "-d",
        "-s",
        "watch",
        "-x",
        "160",
        "-y",
        "40",
        &shell,
    ]);
    assert!(started.status.success(), "tmux new-session: {started:?}");

    let state = scene.holder.inspect(KEY).await.expect("inspect");
    let holder = table_name(state.holders[0].label.as_deref(), &state.holders[0].manager);
    let waiters: Vec<String> = (state.waiters.iter())
        .map(|w| table_name(w.label.as_deref(), &w.manager))
        .collect();
    let shows_all = |screen: &str| {
        screen.contains("tower-lock watch")
            && screen
                .lines()
                .any(|l| l.starts_with(KEY) && l.contains(&holder))
            && screen.contains(&format!("1. {}", waiters[0]))
            && screen.contains(&format!("2. {}", waiters[1]))
    };
    let mut screen = String::new();
    let shown = eventually(GENEROUS, || {
        screen = tmux.screen();
        shows_all(&screen)
    })
    .await;
    assert!(
        shown,
        "the lock, its holder and its queue in order:\n{screen}"
    );
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

    let sent = tmux.run(&["send-keys", "-t", "watch", "q"]);
    assert!(sent.status.success(), "tmux send-keys: {sent:?}");
    let quit = eventually(GENEROUS, || {
        screen = tmux.screen();
        screen.contains("the shell is done")
    })
    .await;
    assert!(quit, "q ends watch:\n{screen}");
    assert!(screen.contains("watch exited with 0"), "{screen}");
    // the shell's screen is back: the alternate screen with the table is gone
    assert!(!screen.contains("OLDEST WAIT"), "{screen}");
    assert!(
        screen.contains("the terminal is in cooked mode"),
        "{screen}"
    );
    scene.finish().await;
}
