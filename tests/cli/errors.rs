//! What the tool does with a wrong command line, a dead or silent server and odd lock names: the
//! exit code a shell expects (2 for the command line, 1 for the server), one clear line, and
//! never a panic.

use std::net::TcpListener;
use std::process::Stdio;

use crate::run::{tower_lock, tower_lock_ok, tower_lock_within, Ran, BIN};
use crate::support::fixture::Fixture;
use crate::support::GENEROUS;

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|arg| (*arg).to_owned()).collect()
}

/// A run that failed with `code`, saying `what`, without a panic.
fn assert_failed(ran: &Ran, code: i32, what: &str) {
    assert_eq!(ran.code, Some(code), "{ran:?}");
    assert!(ran.stderr.contains(what), "{what:?} in {ran:?}");
    assert!(!ran.stderr.contains("panicked"), "{ran:?}");
    assert!(ran.stdout.is_empty(), "{ran:?}");
}

#[tokio::test]
async fn a_wrong_command_line_exits_2_before_connecting() {
    // nothing listens on port 1: a command that connected would fail with 1 instead
    let dead = ["--redis", "redis://127.0.0.1:1"];
    let long_key = "k".repeat(5000);
    let cases: [(&[&str], &str); 11] = [
        (&["frobnicate"], "unrecognized subcommand"),
        (&["show"], "<KEY>"),
        (&["release", "accounts/42"], "add --force"),
        (&["release", "accounts/42", "--force"], "add --yes"),
        (&["show", ""], "lock name is empty"),
        (&["show", &long_key], "the limit is 4096"),
        (&["list", "--limit", "0"], "at least 1"),
        (&["--timeout", "0", "list"], "more than 0 seconds"),
        (&["--namespace", "", "list"], "namespace is empty"),
        (
            &["--redis", "redis://a", "--redis", "redis://b", "list"],
            "--cluster or --sentinel",
        ),
        (
            &["--cluster", "--sentinel", "mymaster", "list"],
            "cannot be used with",
        ),
    ];
    for (args, what) in cases {
        let mut all = strings(&dead);
        all.extend(strings(args));
        assert_failed(&tower_lock(&all).await, 2, what);
    }
    let ran = tower_lock(&strings(&["--redis", "not a url", "list"])).await;
    assert_failed(&ran, 2, "invalid Redis URL");
}

#[tokio::test]
async fn help_and_version_exit_0() {
    let out = tower_lock_ok(&strings(&["--help"])).await;
    for command in ["list", "show", "watch", "release"] {
        assert!(out.contains(command), "{out}");
    }
    let out = tower_lock_ok(&strings(&["--version"])).await;
    assert!(out.starts_with("tower-lock "), "{out}");
}

#[tokio::test]
async fn a_dead_server_exits_1_with_one_line_naming_its_url() {
    let port = {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.local_addr().expect("addr").port()
    };
    let url = format!("redis://app:hunter2@127.0.0.1:{port}");
    let ran = tower_lock(&strings(&["--redis", &url, "show", "accounts/42"])).await;
    assert_failed(&ran, 1, &format!("redis://app:***@127.0.0.1:{port}"));
    assert_eq!(ran.stderr.lines().count(), 1, "{ran:?}");
    assert!(
        !ran.stderr.contains("hunter2"),
        "the password is never shown: {ran:?}"
    );
}

#[tokio::test]
async fn a_silent_server_exits_1_within_the_command_timeout() {
    // accepts connections and never answers, as a frozen server does
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("redis://{}", listener.local_addr().expect("addr"));
    let args = strings(&["--redis", &url, "--timeout", "0.5", "list"]);
    let ran = tower_lock_within(&args, GENEROUS).await;
    assert_failed(&ran, 1, &url);
    assert_eq!(ran.stderr.lines().count(), 1, "{ran:?}");
    drop(listener);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_url_comes_from_the_environment_when_not_given() {
    let fx = Fixture::redis();
    let Fixture::Redis(server) = &fx else {
        unreachable!()
    };
    for variable in ["TOWER_LOCK_REDIS_URL", "REDIS_URL"] {
        let output = tokio::process::Command::new(BIN)
            .args(["show", "accounts/42"])
            .env_remove("TOWER_LOCK_REDIS_URL")
            .env_remove("REDIS_URL")
            .env(variable, server.url())
            .stdin(Stdio::null())
            .output();
        let output = tokio::time::timeout(GENEROUS, output)
            .await
            .expect("ends")
            .expect("runs");
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert_eq!(output.status.code(), Some(0), "{variable}: {output:?}");
        assert!(stdout.contains("state       free"), "{variable}: {stdout}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_name_with_control_characters_never_reaches_the_terminal() {
    let fx = Fixture::redis();
    let manager = fx.manager().await;
    let key = "evil\u{1b}[2J\nname";
    let guard = manager
        .acquire(key, &tower_lock::LockOptions::exclusive())
        .await
        .expect("hold");
    let target = crate::run::target(&fx);
    for command in [&["show", key][..], &["list"][..]] {
        let mut args = target.clone();
        args.extend(strings(command));
        let out = tower_lock_ok(&args).await;
        assert!(out.contains("evil?[2J?name"), "{out}");
        assert!(!out.contains('\u{1b}'), "{out:?}");
    }
    // JSON escapes it, and gives it back as it is
    let mut args = target;
    args.extend(strings(&["show", key, "--json"]));
    let state: serde_json::Value = serde_json::from_str(&tower_lock_ok(&args).await).expect("JSON");
    assert_eq!(state["key"], key);
    assert_eq!(state["holders"].as_array().map(Vec::len), Some(1));
    guard.release().await.expect("release");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_output_pipe_ends_quietly() {
    let fx = Fixture::redis();
    let mut child = tokio::process::Command::new(BIN)
        .args(crate::run::args(&fx, &["show", "accounts/42"]))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    // the reader goes away before the tool writes, as `tower-lock show … | head -0` would
    drop(child.stdout.take());
    let output = tokio::time::timeout(GENEROUS, child.wait_with_output())
        .await
        .expect("it ends")
        .expect("wait");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}
