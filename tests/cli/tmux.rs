//! A terminal for the tool: a tmux server of the test's own (its own socket) running one shell
//! command on a 160×40 screen, whose text the test reads back and to which it sends keys.

use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::run::BIN;
use crate::support::{eventually, GENEROUS};

/// The last line the shell of a [`Terminal`] prints, after the tool and the terminal check.
pub const SHELL_DONE: &str = "the shell is done";

/// What the shell prints when the tool left the terminal in cooked mode (not raw).
pub const COOKED: &str = "the terminal is in cooked mode";

/// One tmux server and its one session; killed on drop.
pub struct Terminal {
    socket: String,
}

/// `text` quoted for the shell tmux runs the command with.
fn quoted(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

impl Terminal {
    /// Run the tool with `args` in a new terminal; when it ends the shell prints its exit code
    /// (`tower-lock exited with N`), [`COOKED`] if the terminal is in cooked mode, and
    /// [`SHELL_DONE`].
    pub fn run_tool(args: &[String]) -> Terminal {
        static SESSIONS: AtomicUsize = AtomicUsize::new(0);
        let socket = format!(
            "tower-lock-cli-{}-{}",
            std::process::id(),
            SESSIONS.fetch_add(1, Ordering::Relaxed)
        );
        let terminal = Terminal { socket };
        let mut words = vec![quoted(BIN)];
        words.extend(args.iter().map(|arg| quoted(arg)));
        let shell = format!(
            "{}; echo \"tower-lock exited with $?\"; \
             stty -a | grep -q -- ' icanon' && echo '{COOKED}'; echo '{SHELL_DONE}'; sleep 60",
            words.join(" ")
        );
        let size = ["-x", "160", "-y", "40"];
        let started =
            terminal.tmux(&[&["new-session", "-d", "-s", "cli"][..], &size, &[&shell]].concat());
        assert!(started.status.success(), "tmux new-session: {started:?}");
        terminal
    }

    fn tmux(&self, args: &[&str]) -> Output {
        Command::new("tmux")
            .args(["-L", &self.socket])
            .args(args)
            .env_remove("TOWER_LOCK_REDIS_URL")
            .env_remove("REDIS_URL")
            .output()
            .expect("tmux (apt-get install tmux; scripts/test.sh installs it)")
    }

    /// The text on the screen now.
    pub fn screen(&self) -> String {
        let captured = self.tmux(&["capture-pane", "-p", "-t", "cli"]);
        String::from_utf8_lossy(&captured.stdout).into_owned()
    }

    /// The screen once `ready` holds for it; panics with the last screen when it never does.
    pub async fn screen_when(&self, what: &str, ready: impl Fn(&str) -> bool) -> String {
        let mut screen = String::new();
        let seen = eventually(GENEROUS, || {
            screen = self.screen();
            ready(&screen)
        })
        .await;
        assert!(seen, "{what}; the screen:\n{screen}");
        screen
    }

    /// Type `keys` (tmux key names: `q`, `C-c`, `Enter`).
    pub fn send(&self, keys: &[&str]) {
        let sent = self.tmux(&[&["send-keys", "-t", "cli"][..], keys].concat());
        assert!(sent.status.success(), "tmux send-keys: {sent:?}");
    }

    /// The screen once the shell is done, with the tool's exit code; asserts that the terminal
    /// is back in cooked mode.
    pub async fn finished(&self) -> (i32, String) {
        let screen = self
            .screen_when("the tool ends", |s| s.contains(SHELL_DONE))
            .await;
        assert!(
            screen.contains(COOKED),
            "the terminal is restored:\n{screen}"
        );
        let code = screen
            .lines()
            .find_map(|l| l.strip_prefix("tower-lock exited with "))
            .and_then(|code| code.trim().parse().ok())
            .unwrap_or_else(|| panic!("an exit code:\n{screen}"));
        (code, screen)
    }
}

impl Drop for Terminal {
    fn drop(&mut self) {
        let _ = self.tmux(&["kill-server"]);
    }
}
